// Package v1 contains the ConfigSet API, group example.reconsim.dev, version v1.
// +kubebuilder:object:generate=true
// +groupName=example.reconsim.dev
package v1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of the ConfigSet API.
	GroupVersion = schema.GroupVersion{Group: "example.reconsim.dev", Version: "v1"}

	// SchemeBuilder adds the API's types to a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the API's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
