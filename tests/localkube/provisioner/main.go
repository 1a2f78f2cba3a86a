// hostpath-provisioner: the dynamic provisioner of the local test cluster's default StorageClass.
//
// It runs as a host process on the cluster's only node (tests/localkube/localkube.py starts it) and
// answers claims of StorageClass "standard" with a hostPath PersistentVolume: one directory per
// volume under -root, created here, removed when the claim goes (reclaimPolicy Delete). Every
// access mode is allowed, ReadWriteMany included, because a directory on a single node is shared
// by every pod that mounts it; that is what lets the collection's RWX /home run on one machine.
// The controller logic (watching claims, binding, retries) is the Kubernetes SIG Storage library's.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

const annotationDir = "hostpath-provisioner.localkube.invalid/path"

type hostPathProvisioner struct {
	root string
	node string
}

func (p *hostPathProvisioner) Provision(ctx context.Context, options controller.ProvisionOptions) (*v1.PersistentVolume, controller.ProvisioningState, error) {
	if options.PVC.Spec.Selector != nil {
		return nil, controller.ProvisioningFinished, errors.New("claims with a selector are not supported")
	}
	// <root>/<namespace>-<claim>-<pv>: an operator looking at the disk sees whose volume it is
	dir := filepath.Join(p.root, fmt.Sprintf("%s-%s-%s", options.PVC.Namespace, options.PVC.Name, options.PVName))
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, controller.ProvisioningFinished, fmt.Errorf("creating %s: %w", dir, err)
	}
	// world-writable like an empty NFS export: pods that run as non-root users can write to it
	if err := os.Chmod(dir, 0o777); err != nil {
		return nil, controller.ProvisioningFinished, fmt.Errorf("chmod %s: %w", dir, err)
	}
	klog.FromContext(ctx).Info("provisioned", "claim", options.PVC.Namespace+"/"+options.PVC.Name, "path", dir)
	hostPathType := v1.HostPathDirectory
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:        options.PVName,
			Annotations: map[string]string{annotationDir: dir},
		},
		Spec: v1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: *options.StorageClass.ReclaimPolicy,
			AccessModes:                   options.PVC.Spec.AccessModes,
			Capacity:                      v1.ResourceList{v1.ResourceStorage: options.PVC.Spec.Resources.Requests[v1.ResourceStorage]},
			VolumeMode:                    options.PVC.Spec.VolumeMode,
			MountOptions:                  options.StorageClass.MountOptions,
			PersistentVolumeSource: v1.PersistentVolumeSource{
				HostPath: &v1.HostPathVolumeSource{Path: dir, Type: &hostPathType},
			},
			// the volume lives on this node's disk: pods that use it can only run here
			NodeAffinity: &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
				MatchExpressions: []v1.NodeSelectorRequirement{{
					Key: "kubernetes.io/hostname", Operator: v1.NodeSelectorOpIn, Values: []string{p.node},
				}},
			}}}},
		},
	}
	return pv, controller.ProvisioningFinished, nil
}

func (p *hostPathProvisioner) Delete(ctx context.Context, pv *v1.PersistentVolume) error {
	dir, ok := pv.Annotations[annotationDir]
	if !ok {
		return &controller.IgnoredError{Reason: "not provisioned by hostpath-provisioner"}
	}
	// never remove anything outside our root, whatever the annotation says
	if rel, err := filepath.Rel(p.root, dir); err != nil || rel == "." || strings.HasPrefix(rel, "..") || strings.Contains(rel, "/") {
		return fmt.Errorf("refusing to delete %q: not a volume directory under %s", dir, p.root)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("removing %s: %w", dir, err)
	}
	klog.FromContext(ctx).Info("deleted", "volume", pv.Name, "path", dir)
	return nil
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the provisioner's user")
	root := flag.String("root", "/var/lib/hpc-localkube/volumes", "directory that holds the volumes")
	name := flag.String("provisioner-name", "localkube.invalid/hostpath", "the StorageClass provisioner field this process answers")
	node := flag.String("node-name", "", "name of the node the volumes live on")
	klog.InitFlags(nil)
	flag.Parse()
	if *node == "" {
		klog.Fatal("-node-name is required")
	}
	if err := os.MkdirAll(*root, 0o755); err != nil {
		klog.Fatalf("creating %s: %v", *root, err)
	}
	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		klog.Fatalf("reading kubeconfig %q: %v", *kubeconfig, err)
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		klog.Fatalf("creating the client: %v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	controller.NewProvisionController(ctx, client, *name, &hostPathProvisioner{root: *root, node: *node},
		controller.LeaderElection(false)).Run(ctx)
}
