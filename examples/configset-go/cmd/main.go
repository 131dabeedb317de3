// The manager of the ConfigSet controller, as kubebuilder scaffolds cmd/main.go.
package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	examplev1 "example.invalid/configset-go/api/v1"
	"example.invalid/configset-go/internal/controller"
)

var scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(examplev1.AddToScheme(scheme))
}

func main() {
	var reads, names string
	var leaderElect bool
	flag.StringVar(&reads, "configmap-reads", string(controller.Cache),
		"where a reconcile lists ConfigMaps: cache (the manager's informers) or api-server")
	flag.StringVar(&names, "configmap-names", string(controller.Generated),
		"how a new ConfigMap is named: generated (generateName) or indexed (<set>-<i>)")
	flag.BoolVar(&leaderElect, "leader-elect", false, "elect a leader before reconciling")
	opts := zap.Options{Development: true}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	setupLog := ctrl.Log.WithName("setup")

	if reads != string(controller.Cache) && reads != string(controller.APIServer) {
		fmt.Fprintf(os.Stderr, "--configmap-reads: cache or api-server, not %q\n", reads)
		os.Exit(2)
	}
	if names != string(controller.Generated) && names != string(controller.Indexed) {
		fmt.Fprintf(os.Stderr, "--configmap-names: generated or indexed, not %q\n", names)
		os.Exit(2)
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         leaderElect,
		LeaderElectionID:       "configset.example.reconsim.dev",
	})
	if err != nil {
		setupLog.Error(err, "unable to start manager")
		os.Exit(1)
	}
	if err := (&controller.ConfigSetReconciler{
		Client:    mgr.GetClient(),
		Scheme:    mgr.GetScheme(),
		APIReader: mgr.GetAPIReader(),
		Reads:     controller.Reads(reads),
		Names:     controller.Names(names),
	}).SetupWithManager(mgr); err != nil {
		setupLog.Error(err, "unable to create controller", "controller", "ConfigSet")
		os.Exit(1)
	}
	setupLog.Info("starting manager")
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		setupLog.Error(err, "problem running manager")
		os.Exit(1)
	}
}
