// Package deps pins the modules the agent uses until real code imports them.
package deps

import (
	_ "github.com/fsnotify/fsnotify"
	_ "github.com/hashicorp/go-retryablehttp"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/urfave/cli/v2"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/api/discovery/v1"
	_ "k8s.io/api/networking/v1"
	_ "k8s.io/apimachinery/pkg/runtime/serializer"
	_ "k8s.io/apimachinery/pkg/util/validation"
	_ "k8s.io/apimachinery/pkg/util/yaml"
	_ "k8s.io/client-go/informers"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/client-go/kubernetes/fake"
	_ "k8s.io/client-go/kubernetes/scheme"
	_ "k8s.io/client-go/tools/clientcmd"
	_ "k8s.io/client-go/tools/events"
	_ "k8s.io/client-go/tools/leaderelection"
	_ "k8s.io/klog/v2"
	_ "sigs.k8s.io/yaml"
)
