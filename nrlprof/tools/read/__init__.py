"""Reading what was captured: files found under the inputs, turned into typed records, one file at a time.

Torch (kineto) traces streamed in batches, nsys reports through `nsys stats`, the manifests, the memory backend's
figures and snapshots, the step anatomy's runs. No figures across files, no Ray, no rendering.
"""
