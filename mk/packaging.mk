# Packaging: galaxy-importer (what Galaxy / Automation Hub run on an upload) on the built collection.
#   make galaxy-import   build the tarball, import it, fail on every error and every warning we can fix
#                        (hack/galaxy_import.py; log in .build/galaxy/galaxy-importer.log)
.PHONY: galaxy-import

TEST_TARGETS += galaxy-import

galaxy-import: venv collections
	python hack/galaxy_import.py
