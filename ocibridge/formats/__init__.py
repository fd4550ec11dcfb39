"""Format bridges: readers turn a source into a ModelPackage, exporters turn an artifact back."""
