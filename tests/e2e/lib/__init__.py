"""Library of the e2e tests: the local control plane (cluster) and kwok GPU nodes (gpu_nodes)."""
