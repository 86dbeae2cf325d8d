// gpuops-metrics-standin: the simulated lab's stand-in for prometheus-adapter (LAB CODE, never shipped).
//
// prometheus-adapter is not served by the Go module proxy, so the lab runs this small aggregated API
// server on sigs.k8s.io/custom-metrics-apiserver instead. It reads the prometheus-adapter rules that the
// gpuops.k8s.dcgm_exporter role renders (ConfigMap key config.yaml: seriesQuery, resources.overrides,
// name.as, metricsQuery with <<.Series>> <<.LabelMatchers>> <<.GroupBy>>) and answers
// custom.metrics.k8s.io pods/<metric> requests with the same PromQL against Prometheus. Only what
// those rules use is supported: pod metrics, a namespace and a pod label override, a literal name.as.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/template"
	"time"

	apierr "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/component-base/logs"
	"k8s.io/klog/v2"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	"sigs.k8s.io/yaml"

	basecmd "sigs.k8s.io/custom-metrics-apiserver/pkg/cmd"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/provider"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/provider/helpers"
)

type override struct {
	Resource string `json:"resource"`
}

type rule struct {
	SeriesQuery string `json:"seriesQuery"`
	Resources   struct {
		Overrides map[string]override `json:"overrides"`
	} `json:"resources"`
	Name struct {
		Matches string `json:"matches"`
		As      string `json:"as"`
	} `json:"name"`
	MetricsQuery string `json:"metricsQuery"`

	series, nsLabel, podLabel string
	tmpl                      *template.Template
}

type rulesFile struct {
	Rules []*rule `json:"rules"`
}

var seriesRE = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)`)

func loadRules(path string) (map[string]*rule, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f rulesFile
	if err := yaml.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := map[string]*rule{}
	for i, r := range f.Rules {
		m := seriesRE.FindStringSubmatch(r.SeriesQuery)
		if m == nil || r.Name.As == "" || r.MetricsQuery == "" {
			return nil, fmt.Errorf("%s rules[%d]: need seriesQuery starting with a series name, name.as and metricsQuery", path, i)
		}
		r.series = m[1]
		for lbl, o := range r.Resources.Overrides {
			switch o.Resource {
			case "namespace":
				r.nsLabel = lbl
			case "pod":
				r.podLabel = lbl
			}
		}
		if r.nsLabel == "" || r.podLabel == "" {
			return nil, fmt.Errorf("%s rules[%d]: the stand-in needs namespace and pod overrides", path, i)
		}
		t, err := template.New(r.Name.As).Delims("<<", ">>").Parse(r.MetricsQuery)
		if err != nil {
			return nil, fmt.Errorf("%s rules[%d] metricsQuery: %w", path, i, err)
		}
		r.tmpl = t
		out[r.Name.As] = r
	}
	return out, nil
}

// query renders the rule's metricsQuery as prometheus-adapter does for pods of one namespace.
func (r *rule) query(namespace string, pods []string) (string, error) {
	quoted := make([]string, len(pods))
	for i, p := range pods {
		quoted[i] = regexp.QuoteMeta(p)
	}
	matchers := fmt.Sprintf(`%s=%q,%s=~%q`, r.nsLabel, namespace, r.podLabel, strings.Join(quoted, "|"))
	var b bytes.Buffer
	err := r.tmpl.Execute(&b, map[string]string{"Series": r.series, "LabelMatchers": matchers, "GroupBy": r.podLabel})
	return b.String(), err
}

type promProvider struct {
	client  dynamic.Interface
	mapper  apimeta.RESTMapper
	promURL string
	rules   map[string]*rule
	http    *http.Client
}

type promResponse struct {
	Status string `json:"status"`
	Error  string `json:"error"`
	Data   struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]interface{}    `json:"value"`
		} `json:"result"`
	} `json:"data"`
}

func (p *promProvider) values(ctx context.Context, r *rule, namespace string, pods []string) (map[string]float64, error) {
	q, err := r.query(namespace, pods)
	if err != nil {
		return nil, err
	}
	u := p.promURL + "/api/v1/query?" + url.Values{"query": {q}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var pr promResponse
	if err := json.NewDecoder(resp.Body).Decode(&pr); err != nil {
		return nil, fmt.Errorf("prometheus %s: %w", resp.Status, err)
	}
	if pr.Status != "success" {
		return nil, fmt.Errorf("prometheus query %q: %s", q, pr.Error)
	}
	out := map[string]float64{}
	for _, s := range pr.Data.Result {
		text, _ := s.Value[1].(string)
		v, err := strconv.ParseFloat(text, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		out[s.Metric[r.podLabel]] = v
	}
	klog.V(2).Infof("query %s -> %v", q, out)
	return out, nil
}

func (p *promProvider) ruleFor(info provider.CustomMetricInfo) (*rule, error) {
	r, ok := p.rules[info.Metric]
	if !ok || info.GroupResource.Resource != "pods" {
		return nil, provider.NewMetricNotFoundError(info.GroupResource, info.Metric)
	}
	return r, nil
}

func (p *promProvider) metricValue(ns, pod, metric string, v float64) (custom_metrics.MetricValue, error) {
	ref, err := helpers.ReferenceFor(p.mapper, types.NamespacedName{Namespace: ns, Name: pod},
		provider.CustomMetricInfo{GroupResource: schema.GroupResource{Resource: "pods"}, Namespaced: true, Metric: metric})
	if err != nil {
		return custom_metrics.MetricValue{}, err
	}
	return custom_metrics.MetricValue{
		DescribedObject: ref,
		Metric:          custom_metrics.MetricIdentifier{Name: metric},
		Timestamp:       metav1.Time{Time: time.Now()},
		Value:           *resource.NewMilliQuantity(int64(math.Round(v*1000)), resource.DecimalSI),
	}, nil
}

func (p *promProvider) GetMetricByName(ctx context.Context, name types.NamespacedName, info provider.CustomMetricInfo, _ labels.Selector) (*custom_metrics.MetricValue, error) {
	r, err := p.ruleFor(info)
	if err != nil {
		return nil, err
	}
	vals, err := p.values(ctx, r, name.Namespace, []string{name.Name})
	if err != nil {
		return nil, apierr.NewServiceUnavailable(err.Error())
	}
	v, ok := vals[name.Name]
	if !ok {
		return nil, provider.NewMetricNotFoundForError(info.GroupResource, info.Metric, name.Name)
	}
	mv, err := p.metricValue(name.Namespace, name.Name, info.Metric, v)
	return &mv, err
}

func (p *promProvider) GetMetricBySelector(ctx context.Context, namespace string, selector labels.Selector, info provider.CustomMetricInfo, _ labels.Selector) (*custom_metrics.MetricValueList, error) {
	r, err := p.ruleFor(info)
	if err != nil {
		return nil, err
	}
	pods, err := helpers.ListObjectNames(p.mapper, p.client, namespace, selector, info)
	if err != nil {
		return nil, err
	}
	list := &custom_metrics.MetricValueList{}
	if len(pods) == 0 {
		return list, nil
	}
	sort.Strings(pods)
	vals, err := p.values(ctx, r, namespace, pods)
	if err != nil {
		return nil, apierr.NewServiceUnavailable(err.Error())
	}
	for _, pod := range pods {
		v, ok := vals[pod]
		if !ok {
			continue
		}
		mv, err := p.metricValue(namespace, pod, info.Metric, v)
		if err != nil {
			return nil, err
		}
		list.Items = append(list.Items, mv)
	}
	return list, nil
}

func (p *promProvider) ListAllMetrics() []provider.CustomMetricInfo {
	out := make([]provider.CustomMetricInfo, 0, len(p.rules))
	for name := range p.rules {
		out = append(out, provider.CustomMetricInfo{GroupResource: schema.GroupResource{Resource: "pods"}, Namespaced: true, Metric: name})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Metric < out[j].Metric })
	return out
}

type standin struct {
	basecmd.AdapterBase
	promURL, rulesPath string
}

func main() {
	logs.InitLogs()
	defer logs.FlushLogs()
	cmd := &standin{}
	cmd.Name = "gpuops-metrics-standin"
	cmd.Flags().StringVar(&cmd.promURL, "prometheus-url", "http://127.0.0.1:9090", "Prometheus base URL")
	cmd.Flags().StringVar(&cmd.rulesPath, "rules", "", "prometheus-adapter rules file (the dcgm_exporter role's config.yaml)")
	logs.AddFlags(cmd.Flags())
	if err := cmd.Flags().Parse(os.Args); err != nil {
		klog.Fatalf("flags: %v", err)
	}
	rules, err := loadRules(cmd.rulesPath)
	if err != nil {
		klog.Fatalf("rules: %v", err)
	}
	client, err := cmd.DynamicClient()
	if err != nil {
		klog.Fatalf("dynamic client: %v", err)
	}
	mapper, err := cmd.RESTMapper()
	if err != nil {
		klog.Fatalf("REST mapper: %v", err)
	}
	cmd.WithCustomMetrics(&promProvider{client: client, mapper: mapper, promURL: strings.TrimRight(cmd.promURL, "/"),
		rules: rules, http: &http.Client{Timeout: 10 * time.Second}})
	names := make([]string, 0, len(rules))
	for n := range rules {
		names = append(names, n)
	}
	sort.Strings(names)
	klog.Infof("serving custom.metrics.k8s.io pods/{%s} from %s", strings.Join(names, ","), cmd.promURL)
	if err := cmd.Run(context.Background()); err != nil {
		klog.Fatalf("run: %v", err)
	}
}
