package peers

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
)

// ClientAPI implements API with a clientset.
type ClientAPI struct{ Client kubernetes.Interface }

// Namespaces lists namespaces by label.
func (c ClientAPI) Namespaces(ctx context.Context, sel labels.Selector) ([]corev1.Namespace, error) {
	l, err := c.Client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// Pods lists a namespace's pods by label.
func (c ClientAPI) Pods(ctx context.Context, namespace string, sel labels.Selector) ([]corev1.Pod, error) {
	l, err := c.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// Claims lists a namespace's ResourceClaims.
func (c ClientAPI) Claims(ctx context.Context, namespace string) ([]resourceapi.ResourceClaim, error) {
	l, err := c.Client.ResourceV1().ResourceClaims(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}
