"""The one table of kinds (ocibridge/kinds/table.py) cannot lie: every capability a line
declares is one its classes have, and every capability they have is declared (the door and
the families load a class only when its line says it can answer), in the orders the command
line and detection rely on."""

from __future__ import annotations

import importlib
from typing import ClassVar

import pytest

from ocibridge.kinds import dispatch, families, table
from ocibridge.kinds.family import Exports, ModelFamily, Probes, Reading, WriteOptions, Writes
from ocibridge.kinds.source import ReadsArtifacts, SniffsContent
from ocibridge.oci.mediatypes import OCI_EMPTY, OCI_LAYER_TAR
from ocibridge.oci.models import Descriptor, Manifest
from ocibridge.stores.base import Store

SOURCES = [k for k in table.KINDS if k.source is not None]
FAMILIES = [k for k in table.KINDS if k.artifacts is not None]


def _class(where: tuple[str, str]) -> type:
    module, cls = where
    found: type = getattr(importlib.import_module(module), cls)
    return found


def test_the_table_has_one_line_per_kind_in_the_orders_the_command_line_shows():
    assert [k.name for k in table.KINDS] == ["modelpack", "kitops", "docker", "modelcar", "carton", "mlsteam",
                                             "ollama", "hf", "directory"]
    assert table.format_choices() == ["directory", "carton", "mlarchive"]
    assert table.family_names() == ["modelpack", "modelkit", "docker-model", "modelcar", "ollama"]
    assert table.source_kinds() == "directory, *.carton, *.mlarchive, ollama:NAME, hf:NAME"
    assert table.file_suffixes() == (".carton", ".mlarchive")
    assert [k.fallback for k in table.sources()] == [False] * (len(table.sources()) - 1) + [True]


@pytest.mark.parametrize("line", table.KINDS, ids=lambda k: k.name)
def test_a_line_names_classes_of_its_own_package(line):
    for where in (line.source, line.artifacts):
        if where is not None:
            assert where[0].startswith(f"ocibridge.kinds.{line.name}."), where


@pytest.mark.parametrize("line", SOURCES, ids=lambda k: k.name)
def test_a_source_line_says_what_its_format_does(line):
    assert line.source is not None
    fmt = _class(line.source)()
    assert fmt.name == line.format and dispatch.by_name(fmt.name) is not None
    assert callable(fmt.read) and callable(fmt.export)  # reads a source, writes it back
    assert isinstance(fmt.picks_files, bool) and isinstance(fmt.shows_progress, bool)
    assert line.sniffs == isinstance(fmt, SniffsContent), "sniffs"
    assert line.converts == isinstance(fmt, ReadsArtifacts), "converts"
    if line.converts:  # it converts the artifacts of a family that exists: its own
        assert isinstance(fmt, ReadsArtifacts)
        assert fmt.family == line.family and families.by_name(fmt.family).name == fmt.family


@pytest.mark.parametrize("line", FAMILIES, ids=lambda k: k.name)
def test_a_family_line_says_what_its_family_does(line):
    assert line.artifacts is not None
    family = _class(line.artifacts)()
    assert isinstance(family, ModelFamily) and family.name == line.family
    assert families.by_name(family.name).name == family.name
    assert line.writes == isinstance(family, Writes), "writes"
    assert line.exports == isinstance(family, Exports), "exports"
    assert line.probes == isinstance(family, Probes), "probes"
    assert not line.schemes and not line.suffixes or line.source is not None  # only a format is named so


def _manifest(config_type: str = OCI_EMPTY, artifact_type: str | None = None) -> Manifest:
    layer = Descriptor.for_bytes(OCI_LAYER_TAR, b"x")
    return Manifest(artifactType=artifact_type, config=Descriptor.for_bytes(config_type, b"{}"), layers=[layer])


@pytest.mark.parametrize("line", [k for k in FAMILIES if k.config_types or k.artifact_types], ids=lambda k: k.name)
def test_the_media_types_a_line_declares_are_the_ones_detection_recognises(line):
    for config_type in line.config_types:
        found = families.family_of(_manifest(config_type))
        assert found is not None and found.name == line.family, config_type
    for artifact_type in line.artifact_types:
        found = families.family_of(_manifest(artifact_type=artifact_type))
        assert found is not None and found.name == line.family, artifact_type


def test_a_line_names_a_format_and_a_family_each_with_its_class():
    with pytest.raises(ValueError, match="with their class"):
        table.Line("x", source=("m", "C"))
    with pytest.raises(ValueError, match="with their class"):
        table.Line("x", family="x")


TOY_CONFIG = "application/vnd.example.toy.config.v1+json"


class ToyFamily:
    """A family recognised by its config media type, registered at run time below."""

    name: ClassVar[str] = "toy-family"
    title: ClassVar[str] = "Toy"

    def matches(self, manifest: Manifest) -> bool:
        return manifest.config.mediaType == TOY_CONFIG

    def key(self, manifest: Manifest | None, options: WriteOptions) -> str:
        return self.name

    def read(self, store: Store, desc: Descriptor, data: bytes, manifest: Manifest) -> Reading:
        raise NotImplementedError


def test_a_family_registered_at_run_time_is_detected_after_the_built_in_ones():
    line = table.Line("toy", family="toy-family", artifacts=(__name__, "ToyFamily"), config_types=(TOY_CONFIG,))
    table.register(line)
    try:
        assert families.names()[-1] == "toy-family" and table.KINDS[-1].fallback  # before the fallback
        found = families.family_of(_manifest(TOY_CONFIG))
        assert found is not None and found.name == "toy-family"
        with pytest.raises(ValueError, match="twice"):
            table.register(table.Line("other", family="toy-family", artifacts=(__name__, "ToyFamily")))
    finally:
        table.unregister("toy")
    assert "toy-family" not in families.names() and families.family_of(_manifest(TOY_CONFIG)) is None


def test_the_architecture_doc_lists_the_kinds_as_the_table_has_them():
    """docs/architecture-kinds.md's table of kinds names each line's kind, format and family, in order."""
    import re
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "architecture-kinds.md").read_text()
    section = doc.split("## Adding a kind", 1)[1].split("\n### ", 1)[0]
    rows = [[re.match(r"`([^`]*)`", cell.strip()) for cell in row.strip("|").split("|")]
            for row in section.splitlines() if row.startswith("| `")]
    listed = [tuple(m.group(1) if m else None for m in row) for row in rows]
    assert listed == [(k.name, k.format, k.family) for k in table.KINDS]


def test_looking_into_a_file_loads_only_the_formats_that_declare_sniff(tmp_path):
    """A file whose name says nothing is shown to the formats whose line says ``sniffs`` only:
    the Ollama and Hugging Face formats (which read no file) stay unloaded."""
    import subprocess
    import sys
    from pathlib import Path

    plain = tmp_path / "weights.bin"
    plain.write_bytes(b"not an archive")
    probe = ("import sys\nfrom ocibridge.kinds import dispatch\n"
             f"print(dispatch.source_format({str(plain)!r}).name)\n"
             "print(sorted(m for m in sys.modules if m.startswith(('ocibridge.kinds.ollama', 'ocibridge.kinds.hf'))))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=Path(__file__).resolve().parents[2],
                          capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == ["directory", "[]"], done.stdout
    sniffing = [k.format for k in table.sources() if k.sniffs]
    assert sniffing == ["carton", "mlarchive"]
