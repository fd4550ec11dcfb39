"""What makes a package of files a Hub dataset's artifact (kinds/hf/repotype.py's contract): each file
a layer of the dataset kind but the top ``README.md`` (a doc), the card's dataset fields in the config
and annotations (model/datasetcard.py), and the annotation that names the repository type. ``push
hf:datasets/…`` builds through it; a dataset commit made elsewhere (serve) can too, with the same result."""

from __future__ import annotations

import fnmatch
import posixpath
from collections.abc import Sequence

from ocibridge.kinds.hf.repotype import DATASET, REPO_TYPE_KEY, dataset_file_kind
from ocibridge.model.classify import classify
from ocibridge.model.datasetcard import fill_dataset
from ocibridge.model.package import ModelPackage
from ocibridge.oci.mediatypes import Kind


def dataset_kind(rel: str, size: int, overrides: Sequence[tuple[str, Kind]] = ()) -> Kind:
    """A dataset file's kind: ``--kind GLOB=KIND`` where one matches (the last wins), else the contract's."""
    name = posixpath.basename(rel)
    if any(fnmatch.fnmatchcase(rel, glob) or fnmatch.fnmatchcase(name, glob) for glob, _ in overrides):
        return classify(rel, size, overrides)
    return dataset_file_kind(rel)


def mark_dataset(package: ModelPackage) -> None:
    """The card's dataset fields and the repository type annotation, on a package whose files have
    their dataset kinds."""
    fill_dataset(package)
    package.annotations[REPO_TYPE_KEY] = DATASET
