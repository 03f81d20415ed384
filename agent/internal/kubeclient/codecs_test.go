package kubeclient_test

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	"github.com/restysync/restysync/agent/internal/kubeclient"
)

func kubeclientCodecs() runtime.NegotiatedSerializer {
	return serializer.NewCodecFactory(kubeclient.Scheme).WithoutConversion()
}
