module example.invalid/clock

go 1.26
