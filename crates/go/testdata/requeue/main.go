// A controller-runtime manager that reconciles ConfigMaps: it creates one, marks it
// with an annotation, and asks to be requeued 30 s later, printing each reconcile
// with the time it ran.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

type reconciler struct{ client.Client }

func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var cm corev1.ConfigMap
	if err := r.Get(ctx, req.NamespacedName, &cm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	fmt.Println("reconcile", req.NamespacedName, time.Now().UTC().Format(time.RFC3339Nano))
	if cm.Annotations["seen"] == "" {
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		cm.Annotations["seen"] = "yes"
		if err := r.Update(ctx, &cm); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{RequeueAfter: 30 * time.Second}, nil
}

func main() {
	ctrl.SetLogger(zap.New(zap.UseDevMode(true)))
	cfg := ctrl.GetConfigOrDie()
	direct, err := client.New(cfg, client.Options{})
	if err != nil {
		fmt.Println("client:", err)
		os.Exit(1)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: "default"}}
	if err := direct.Create(context.Background(), cm); err != nil {
		fmt.Println("create:", err)
		os.Exit(1)
	}
	fmt.Println("created", cm.Name, "uid", cm.UID)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{})
	if err != nil {
		fmt.Println("manager:", err)
		os.Exit(1)
	}
	if err := ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Complete(&reconciler{mgr.GetClient()}); err != nil {
		fmt.Println("controller:", err)
		os.Exit(1)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		fmt.Println("start:", err)
		os.Exit(1)
	}
}
