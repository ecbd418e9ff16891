// capd-crictl: a minimal CRI command-line client for the capd-rs real node image.
//
// Debian does not package cri-tools, so this program stands in for `crictl` when the user brings
// none. It is a real CRI client (gRPC to the runtime's socket, with Debian's packaged CRI API,
// golang-github-kubernetes-cri-api-dev, and gRPC), and implements the subset of crictl's commands
// that kubeadm (v1.28 runs crictl; later versions talk CRI themselves) and the capd-rs provider run:
//
//	info [-o json|go-template --template T]   kubeadm: IsRunning, SandboxImage
//	version
//	ps [-a] [-q]                              the provider's runtime check
//	pods [-q]                                 kubeadm reset
//	stopp ID..., rmp ID...                    kubeadm reset
//	images [-q], inspecti IMAGE, pull IMAGE   kubeadm's image checks
//	rmi IMAGE...
//
// Global flags as crictl's: -r/--runtime-endpoint, -i/--image-endpoint, -t/--timeout, -D/--debug;
// /etc/crictl.yaml (runtime-endpoint, image-endpoint, timeout) and CONTAINER_RUNTIME_ENDPOINT /
// IMAGE_SERVICE_ENDPOINT are read like crictl reads them. e2e/images/real/build.sh builds it with
// Debian's Go in GOPATH mode over Debian's packaged Go sources, offline.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"text/template"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const defaultEndpoint = "unix:///run/containerd/containerd.sock"

type options struct {
	runtimeEndpoint string
	imageEndpoint   string
	timeout         time.Duration
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "crictl: "+format+"\n", args...)
	os.Exit(1)
}

// readConfig reads the keys crictl's config file may set; a missing file is no error.
func readConfig(path string, o *options) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		line := strings.TrimSpace(scanner.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		value = strings.Trim(strings.TrimSpace(value), `"'`)
		switch strings.TrimSpace(key) {
		case "runtime-endpoint":
			o.runtimeEndpoint = value
		case "image-endpoint":
			o.imageEndpoint = value
		case "timeout":
			if secs, err := strconv.Atoi(value); err == nil && secs > 0 {
				o.timeout = time.Duration(secs) * time.Second
			}
		}
	}
}

func dial(ctx context.Context, endpoint string) *grpc.ClientConn {
	path := strings.TrimPrefix(endpoint, "unix://")
	if strings.Contains(path, "://") {
		fail("only unix socket endpoints are supported, not %q", endpoint)
	}
	conn, err := grpc.DialContext(ctx, "passthrough:///"+path,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}),
		grpc.WithBlock(),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16*1024*1024)))
	if err != nil {
		fail("connect to %s: %v", endpoint, err)
	}
	return conn
}

func main() {
	o := options{timeout: 2 * time.Second}
	readConfig("/etc/crictl.yaml", &o)
	if v := os.Getenv("CONTAINER_RUNTIME_ENDPOINT"); v != "" {
		o.runtimeEndpoint = v
	}
	if v := os.Getenv("IMAGE_SERVICE_ENDPOINT"); v != "" {
		o.imageEndpoint = v
	}

	global := flag.NewFlagSet("crictl", flag.ExitOnError)
	global.StringVar(&o.runtimeEndpoint, "r", o.runtimeEndpoint, "runtime endpoint")
	global.StringVar(&o.runtimeEndpoint, "runtime-endpoint", o.runtimeEndpoint, "runtime endpoint")
	global.StringVar(&o.imageEndpoint, "i", o.imageEndpoint, "image endpoint")
	global.StringVar(&o.imageEndpoint, "image-endpoint", o.imageEndpoint, "image endpoint")
	global.DurationVar(&o.timeout, "t", o.timeout, "timeout")
	global.DurationVar(&o.timeout, "timeout", o.timeout, "timeout")
	global.Bool("D", false, "debug (ignored)")
	global.Bool("debug", false, "debug (ignored)")
	global.Parse(os.Args[1:])
	if o.runtimeEndpoint == "" {
		o.runtimeEndpoint = defaultEndpoint
	}
	if o.imageEndpoint == "" {
		o.imageEndpoint = o.runtimeEndpoint
	}
	args := global.Args()
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: crictl [-r endpoint] [-i endpoint] info|version|ps|pods|stopp|rmp|images|inspecti|pull|rmi ...")
		os.Exit(2)
	}
	command, rest := args[0], args[1:]

	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	runtime := func() runtimeapi.RuntimeServiceClient {
		return runtimeapi.NewRuntimeServiceClient(dial(ctx, o.runtimeEndpoint))
	}
	images := func() runtimeapi.ImageServiceClient {
		return runtimeapi.NewImageServiceClient(dial(ctx, o.imageEndpoint))
	}

	switch command {
	case "info":
		info(ctx, runtime(), rest)
	case "version":
		resp, err := runtime().Version(ctx, &runtimeapi.VersionRequest{})
		if err != nil {
			fail("version: %v", err)
		}
		fmt.Printf("Version:  %s\nRuntimeName:  %s\nRuntimeVersion:  %s\nRuntimeApiVersion:  %s\n",
			resp.Version, resp.RuntimeName, resp.RuntimeVersion, resp.RuntimeApiVersion)
	case "ps":
		ps(ctx, runtime(), rest)
	case "pods":
		pods(ctx, runtime(), rest)
	case "stopp", "rmp":
		client := runtime()
		for _, id := range rest {
			var err error
			if command == "stopp" {
				_, err = client.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id})
			} else {
				_, err = client.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id})
			}
			if err != nil {
				fail("%s %s: %v", command, id, err)
			}
			fmt.Println(id)
		}
	case "images":
		listImages(ctx, images(), rest)
	case "inspecti":
		client := images()
		for _, image := range rest {
			resp, err := client.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: image}, Verbose: true})
			if err != nil {
				fail("inspecti %s: %v", image, err)
			}
			if resp.Image == nil {
				fail("no such image %q present", image)
			}
			out, _ := json.MarshalIndent(map[string]interface{}{"status": resp.Image, "info": resp.Info}, "", "  ")
			fmt.Println(string(out))
		}
	case "pull":
		if len(rest) != 1 {
			fail("pull needs one image")
		}
		resp, err := images().PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: rest[0]}})
		if err != nil {
			fail("pull %s: %v", rest[0], err)
		}
		fmt.Printf("Image is up to date for %s\n", resp.ImageRef)
	case "rmi":
		client := images()
		for _, image := range rest {
			if _, err := client.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: image}}); err != nil {
				fail("rmi %s: %v", image, err)
			}
			fmt.Printf("Deleted: %s\n", image)
		}
	default:
		fail("unsupported command %q (this is capd-rs's minimal crictl)", command)
	}
}

// info prints the runtime status and its info map like crictl does: {"status": ..., <key>: <json>}.
func info(ctx context.Context, client runtimeapi.RuntimeServiceClient, args []string) {
	fs := flag.NewFlagSet("info", flag.ExitOnError)
	output := fs.String("o", "json", "json|go-template")
	fs.StringVar(output, "output", "json", "json|go-template")
	tmpl := fs.String("template", "", "go template")
	fs.Parse(args)
	resp, err := client.Status(ctx, &runtimeapi.StatusRequest{Verbose: true})
	if err != nil {
		fail("getting status of runtime: %v", err)
	}
	merged := map[string]interface{}{}
	statusJSON, _ := json.Marshal(resp.Status)
	var status interface{}
	_ = json.Unmarshal(statusJSON, &status)
	merged["status"] = status
	for key, value := range resp.Info {
		var parsed interface{}
		if json.Unmarshal([]byte(value), &parsed) == nil {
			merged[key] = parsed
		} else {
			merged[key] = value
		}
	}
	switch *output {
	case "go-template":
		t, err := template.New("info").Parse(*tmpl)
		if err != nil {
			fail("template: %v", err)
		}
		if err := t.Execute(os.Stdout, merged); err != nil {
			fail("template: %v", err)
		}
		fmt.Println()
	default:
		out, _ := json.MarshalIndent(merged, "", "  ")
		fmt.Println(string(out))
	}
}

func truncate(id string) string {
	if len(id) > 13 {
		return id[:13]
	}
	return id
}

func age(nanos int64) string {
	return time.Since(time.Unix(0, nanos)).Round(time.Second).String() + " ago"
}

func ps(ctx context.Context, client runtimeapi.RuntimeServiceClient, args []string) {
	fs := flag.NewFlagSet("ps", flag.ExitOnError)
	all := fs.Bool("a", false, "show all containers")
	quiet := fs.Bool("q", false, "only ids")
	fs.Parse(args)
	filter := &runtimeapi.ContainerFilter{}
	if !*all {
		filter.State = &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}
	}
	resp, err := client.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: filter})
	if err != nil {
		fail("listing containers: %v", err)
	}
	sort.Slice(resp.Containers, func(i, j int) bool { return resp.Containers[i].CreatedAt > resp.Containers[j].CreatedAt })
	if *quiet {
		for _, c := range resp.Containers {
			fmt.Println(c.Id)
		}
		return
	}
	w := tabwriter.NewWriter(os.Stdout, 10, 1, 3, ' ', 0)
	fmt.Fprintln(w, "CONTAINER\tIMAGE\tCREATED\tSTATE\tNAME\tATTEMPT\tPOD ID\tPOD")
	for _, c := range resp.Containers {
		name, attempt := "", uint32(0)
		if c.Metadata != nil {
			name, attempt = c.Metadata.Name, c.Metadata.Attempt
		}
		image := ""
		if c.Image != nil {
			image = c.Image.Image
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", truncate(c.Id), truncate(strings.TrimPrefix(image, "sha256:")),
			age(c.CreatedAt), strings.TrimPrefix(c.State.String(), "CONTAINER_"), name, attempt,
			truncate(c.PodSandboxId), c.Labels["io.kubernetes.pod.name"])
	}
	w.Flush()
}

func pods(ctx context.Context, client runtimeapi.RuntimeServiceClient, args []string) {
	fs := flag.NewFlagSet("pods", flag.ExitOnError)
	quiet := fs.Bool("q", false, "only ids")
	fs.Parse(args)
	resp, err := client.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		fail("listing pod sandboxes: %v", err)
	}
	if *quiet {
		for _, p := range resp.Items {
			fmt.Println(p.Id)
		}
		return
	}
	w := tabwriter.NewWriter(os.Stdout, 10, 1, 3, ' ', 0)
	fmt.Fprintln(w, "POD ID\tCREATED\tSTATE\tNAME\tNAMESPACE\tATTEMPT")
	for _, p := range resp.Items {
		name, namespace, attempt := "", "", uint32(0)
		if p.Metadata != nil {
			name, namespace, attempt = p.Metadata.Name, p.Metadata.Namespace, p.Metadata.Attempt
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\n", truncate(p.Id), age(p.CreatedAt),
			strings.TrimPrefix(p.State.String(), "SANDBOX_"), name, namespace, attempt)
	}
	w.Flush()
}

func listImages(ctx context.Context, client runtimeapi.ImageServiceClient, args []string) {
	fs := flag.NewFlagSet("images", flag.ExitOnError)
	quiet := fs.Bool("q", false, "only ids")
	fs.Parse(args)
	resp, err := client.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil {
		fail("listing images: %v", err)
	}
	if *quiet {
		for _, image := range resp.Images {
			fmt.Println(image.Id)
		}
		return
	}
	w := tabwriter.NewWriter(os.Stdout, 10, 1, 3, ' ', 0)
	fmt.Fprintln(w, "IMAGE\tTAG\tIMAGE ID\tSIZE")
	for _, image := range resp.Images {
		id := truncate(strings.TrimPrefix(image.Id, "sha256:"))
		size := fmt.Sprintf("%.1fMB", float64(image.Size_)/1e6)
		if len(image.RepoTags) == 0 {
			fmt.Fprintf(w, "<none>\t<none>\t%s\t%s\n", id, size)
		}
		for _, tag := range image.RepoTags {
			i := strings.LastIndex(tag, ":")
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", tag[:i], tag[i+1:], id, size)
		}
	}
	w.Flush()
}
