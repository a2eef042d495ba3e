//go:build testbed

package e2e

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/test/testbed"
)

// s3 is the "more specific" destination of seed 003's Story 3 (the seed's
// AWS S3 ranges, here part of TEST-NET-2): internet is in it, elsewhere
// is not.
const (
	s3        = "198.51.100.0/28"
	elsewhere = "198.51.100.200"
)

// story3 runs seed 003's Story 3 on the free pod's eth0 with DSCP instead
// of rates (what the wire shows): a catch-all object for the internet at
// priority 1 and a more specific one for s3 at priority 2. The specific
// one wins where both match, the catch-all elsewhere; lowered below the
// catch-all (priority 0) it loses there too. Both objects are deleted at
// the end.
func (b *qosPrimaryBed) story3() {
	b.t.Helper()
	free := metav1.LabelSelector{MatchLabels: map[string]string{"user-type": "free"}}
	catchAll := story3Object(b.ns, "story3-internet", free, 1, 10, "0.0.0.0/0", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")
	specific := story3Object(b.ns, "story3-s3", free, 2, 30, s3)
	b.create(catchAll, specific)
	b.ping("free", internet, 30, "Story 3: the specific object (priority 2) where both match")
	b.ping("free", elsewhere, 10, "Story 3: the catch-all (priority 1) elsewhere")
	api := b.e.NC.NetclassV1alpha1().NetworkQoSes(b.ns)
	ctx := testbed.Context(b.t, time.Minute)
	cur, err := api.Get(ctx, specific.Name, metav1.GetOptions{})
	if err != nil {
		b.t.Fatal(err)
	}
	cur.Spec.Priority = 0
	if _, err := api.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		b.t.Fatalf("update NetworkQoS %s: %v", cur.Name, err)
	}
	b.ping("free", internet, 10, "Story 3: the specific object lowered to priority 0 loses to the catch-all")
	b.delete(catchAll.Name)
	b.delete(specific.Name)
}

func story3Object(ns, name string, pods metav1.LabelSelector, priority, dscp int32, cidr ncv1.CIDR, except ...ncv1.CIDR) *ncv1.NetworkQoS {
	return &ncv1.NetworkQoS{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: ncv1.NetworkQoSSpec{PodSelector: pods, Priority: priority, Egress: []ncv1.Rule{{DSCP: dscp,
			Classifier: &ncv1.Classifier{To: []ncv1.Destination{{IPBlock: &ncv1.IPBlock{CIDR: cidr, Except: except}}}}}}},
	}
}
