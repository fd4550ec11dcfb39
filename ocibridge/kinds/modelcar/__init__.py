"""ModelCar images: files under ``/models``, built for containerd/KServe and read back."""
