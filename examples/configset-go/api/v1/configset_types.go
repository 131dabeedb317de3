package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConfigSetSpec is what a ConfigSet asks for: this many ConfigMaps.
type ConfigSetSpec struct {
	// +kubebuilder:validation:Minimum=0
	Replicas int32 `json:"replicas"`
}

// ConfigSetStatus is what the controller made last.
type ConfigSetStatus struct {
	Replicas int32 `json:"replicas,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status

// ConfigSet keeps spec.replicas ConfigMaps, labelled with its name and controlled by
// it.
type ConfigSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ConfigSetSpec   `json:"spec,omitempty"`
	Status ConfigSetStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ConfigSetList is a list of ConfigSets.
type ConfigSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ConfigSet `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ConfigSet{}, &ConfigSetList{})
}
