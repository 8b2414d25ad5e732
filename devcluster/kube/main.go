// The dev cluster's four Kubernetes commands in one executable, so that one link serves them
// all (devcluster/build.sh). Each is reached by the name it is started as: build.sh makes
// kube-apiserver, kube-controller-manager, kube-scheduler and kubectl links to it.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	_ "time/tzdata" // CronJob time zones, as kube-apiserver and the controller manager embed them

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go's metrics, as each command registers them
	_ "k8s.io/component-base/metrics/prometheus/version"  // the version metric
	kubectl "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

var servers = map[string]func() *cobra.Command{
	"kube-apiserver":          apiserver.NewAPIServerCommand,
	"kube-controller-manager": controllermanager.NewControllerManagerCommand,
	"kube-scheduler":          func() *cobra.Command { return scheduler.NewSchedulerCommand() },
}

func main() {
	name := filepath.Base(os.Args[0])
	if name == "kubectl" {
		// kubectl reads -v before its flags are parsed: its plugins and .kuberc log with it.
		logs.GlogSetter(kubectl.GetLogVerbosity(os.Args)) //nolint:errcheck // a bad -v is said again when the flags are parsed
		if err := cli.RunNoErrOutput(kubectl.NewDefaultKubectlCommand()); err != nil {
			kubectlutil.CheckErr(err)
		}
		return
	}
	command, ok := servers[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "%s: start me as kubectl, kube-apiserver, kube-controller-manager or kube-scheduler\n", name)
		os.Exit(2)
	}
	os.Exit(cli.Run(command()))
}
