//go:build wasip1

// This file is added to the program's main package when reconsim builds it
// (go build -overlay) and the program uses client-go: controller-runtime sends
// built-in kinds as protobuf (pkg/client/apiutil, createRestConfig), and reconsim's
// API server reads JSON. A request body in protobuf is decoded with client-go's own
// scheme and sent as the same object in JSON; answers are JSON already, which
// client-go reads by their Content-Type. The objects, and so the server's behaviour,
// are the same; only the bytes on the wire differ (docs/go.md).

package main

// Every import is named apart: these names share the main package's file scope
// with the user's own declarations (kubebuilder's main declares `scheme`).
import (
	reconsimBytes "bytes"
	reconsimIO "io"
	reconsimHTTP "net/http"
	reconsimStrings "strings"

	reconsimRuntime "k8s.io/apimachinery/pkg/runtime"
	reconsimScheme "k8s.io/client-go/kubernetes/scheme"
)

type reconsimJSON struct{ next reconsimHTTP.RoundTripper }

func (t reconsimJSON) RoundTrip(req *reconsimHTTP.Request) (*reconsimHTTP.Response, error) {
	if req.Body == nil || !reconsimStrings.HasPrefix(req.Header.Get("Content-Type"), reconsimRuntime.ContentTypeProtobuf) {
		return t.next.RoundTrip(req)
	}
	body, err := reconsimIO.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	obj, gvk, err := reconsimScheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
	if err != nil {
		return nil, err
	}
	js, err := reconsimRuntime.Encode(reconsimScheme.Codecs.LegacyCodec(gvk.GroupVersion()), obj)
	if err != nil {
		return nil, err
	}
	out := req.Clone(req.Context())
	out.Body = reconsimIO.NopCloser(reconsimBytes.NewReader(js))
	out.GetBody = func() (reconsimIO.ReadCloser, error) { return reconsimIO.NopCloser(reconsimBytes.NewReader(js)), nil }
	out.ContentLength = int64(len(js))
	out.Header.Set("Content-Type", reconsimRuntime.ContentTypeJSON)
	return t.next.RoundTrip(out)
}

func init() {
	reconsimHTTP.DefaultTransport = reconsimJSON{next: reconsimHTTP.DefaultTransport}
}
