module example.invalid/reconsim/reconsimtest

go 1.26
