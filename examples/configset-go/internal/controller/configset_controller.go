// Package controller holds the ConfigSet controller, written as kubebuilder scaffolds
// one: a controller-runtime Reconciler with no reconsim import.
//
// A ConfigSet keeps spec.replicas ConfigMaps, made with generateName, labelled with
// its name and controlled by it (a controller reference, so the garbage collector
// removes them with it). One reconcile:
//  1. list the ConfigMaps labelled with the ConfigSet's name that it controls and
//     that are not being deleted;
//  2. too few: create the missing ones; too many: delete the last by name;
//  3. write status.replicas through the status subresource.
//
// The bug (Reads: Cache): step 1 lists through the manager's client, which reads the
// informer cache. The cache learns of the reconcile's own creates only from the
// ConfigMaps' watch, later than the creates' answers: a reconcile that runs before
// those events arrive (the status update's own event wakes one at once) counts too
// few and creates them again. controller-runtime's answer is expectations, or a
// read the cache cannot lag.
//
// The fix (Reads: APIServer): step 1 lists through the manager's API reader, a
// consistent read from the API server, which sees every write it answered before.
// controller-runtime reconciles one object at a time, so each reconcile sees the
// creates of the one before.
package controller

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	examplev1 "example.invalid/configset-go/api/v1"
)

// Label is the label a ConfigSet finds its ConfigMaps by.
const Label = "configset.example.reconsim.dev/name"

// Names says how step 2 names a new ConfigMap.
type Names string

const (
	// Generated names each new ConfigMap `<set>-<random>` (generateName): two writers
	// that both find one missing both make one.
	Generated Names = "generated"
	// Indexed names them `<set>-0` .. `<set>-<replicas-1>`: a second writer's create of
	// the same one is refused (AlreadyExists), so even a deposed leader's late create
	// adds nothing.
	Indexed Names = "indexed"
)

// Reads says where step 1 lists ConfigMaps from.
type Reads string

const (
	// Cache lists from the manager's informer cache (the bug).
	Cache Reads = "cache"
	// APIServer lists from the API server, a consistent read (the fix).
	APIServer Reads = "api-server"
)

// ConfigSetReconciler reconciles ConfigSets.
type ConfigSetReconciler struct {
	client.Client
	Scheme *runtime.Scheme
	// APIReader reads from the API server, past the cache (mgr.GetAPIReader()).
	APIReader client.Reader
	Reads     Reads
	Names     Names
}

// +kubebuilder:rbac:groups=example.reconsim.dev,resources=configsets,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=example.reconsim.dev,resources=configsets/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;delete

// Reconcile brings a ConfigSet's ConfigMaps to its spec.replicas.
func (r *ConfigSetReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx)
	var cs examplev1.ConfigSet
	if err := r.Get(ctx, req.NamespacedName, &cs); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !cs.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	var reader client.Reader = r.Client
	if r.Reads == APIServer {
		reader = r.APIReader
	}
	var cms corev1.ConfigMapList
	if err := reader.List(ctx, &cms, client.InNamespace(req.Namespace), client.MatchingLabels{Label: cs.Name}); err != nil {
		return ctrl.Result{}, err
	}
	var owned []corev1.ConfigMap
	for _, cm := range cms.Items {
		ref := metav1.GetControllerOf(&cm)
		if cm.DeletionTimestamp.IsZero() && ref != nil && ref.UID == cs.UID {
			owned = append(owned, cm)
		}
	}
	sort.Slice(owned, func(i, j int) bool { return owned[i].Name < owned[j].Name })
	want := int(cs.Spec.Replicas)
	create := func(name string) error {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Name:      name,
				Namespace: cs.Namespace,
				Labels:    map[string]string{Label: cs.Name},
			},
			Data: map[string]string{"owner": cs.Name},
		}
		if name == "" {
			cm.GenerateName = cs.Name + "-"
		}
		if err := controllerutil.SetControllerReference(&cs, cm, r.Scheme); err != nil {
			return err
		}
		if err := r.Create(ctx, cm); err != nil {
			return err
		}
		log.Info("created", "configmap", cm.Name)
		return nil
	}
	if r.Names == Indexed {
		have := map[string]bool{}
		for _, cm := range owned {
			have[cm.Name] = true
		}
		wanted := map[string]bool{}
		for i := 0; i < want; i++ {
			name := fmt.Sprintf("%s-%d", cs.Name, i)
			wanted[name] = true
			if !have[name] {
				if err := create(name); client.IgnoreAlreadyExists(err) != nil {
					return ctrl.Result{}, err
				}
			}
		}
		for i := range owned {
			if !wanted[owned[i].Name] {
				if err := r.Delete(ctx, &owned[i]); client.IgnoreNotFound(err) != nil {
					return ctrl.Result{}, err
				}
				log.Info("deleted", "configmap", owned[i].Name)
			}
		}
	} else {
		for i := len(owned); i < want; i++ {
			if err := create(""); err != nil {
				return ctrl.Result{}, err
			}
		}
		for i := len(owned) - 1; i >= want; i-- {
			if err := r.Delete(ctx, &owned[i]); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, err
			}
			log.Info("deleted", "configmap", owned[i].Name)
		}
	}
	if cs.Status.Replicas != cs.Spec.Replicas {
		cs.Status.Replicas = cs.Spec.Replicas
		if err := r.Status().Update(ctx, &cs); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{RequeueAfter: 5 * time.Minute}, nil
}

// SetupWithManager watches ConfigSets and the ConfigMaps they control.
func (r *ConfigSetReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&examplev1.ConfigSet{}).
		Owns(&corev1.ConfigMap{}).
		Named("configset").
		Complete(r)
}
