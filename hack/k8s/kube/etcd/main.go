// The etcd server binary: the same entry point as etcd's own main package (the go.etcd.io/etcd/v3
// root module, which the module proxy does not serve), built from go.etcd.io/etcd/server/v3.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
