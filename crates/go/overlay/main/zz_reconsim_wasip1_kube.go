//go:build wasip1

// This file is added to the program's main package when reconsim builds it
// (go build -overlay) and the program uses client-go: controller-runtime sends
// built-in kinds as protobuf (pkg/client/apiutil, createRestConfig), and reconsim's
// API server reads JSON. A request body in protobuf is decoded with client-go's own
// scheme and sent as the same object in JSON; answers are JSON already, which
// client-go reads by their Content-Type. The objects, and so the server's behaviour,
// are the same; only the bytes on the wire differ (docs/go.md).

package main

import (
	"bytes"
	"io"
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
)

type reconsimJSON struct{ next http.RoundTripper }

func (t reconsimJSON) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body == nil || !strings.HasPrefix(req.Header.Get("Content-Type"), runtime.ContentTypeProtobuf) {
		return t.next.RoundTrip(req)
	}
	body, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	obj, gvk, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
	if err != nil {
		return nil, err
	}
	js, err := runtime.Encode(scheme.Codecs.LegacyCodec(gvk.GroupVersion()), obj)
	if err != nil {
		return nil, err
	}
	out := req.Clone(req.Context())
	out.Body = io.NopCloser(bytes.NewReader(js))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(js)), nil }
	out.ContentLength = int64(len(js))
	out.Header.Set("Content-Type", runtime.ContentTypeJSON)
	return t.next.RoundTrip(out)
}

func init() {
	http.DefaultTransport = reconsimJSON{next: http.DefaultTransport}
}
