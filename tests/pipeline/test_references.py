"""The reference set: every reference compiles, every cited fact audits to a verified hash, ids keep meaning."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import db_rows
from fabricref.compile import stage
from fabricref.core.registry import open_tables
from fabricref.errors import CompileError
from fabricref.inspect.audit import audit, unverified

# Discovered from models/references: every model compiles with the kind it declares (its top-level `kind:` line,
# read without parsing every model at collection).
REFERENCES = {
    p.stem: re.search(r"^kind:\s*(\S+)$", p.read_text(), re.MULTILINE).group(1)
    for p in sorted((Path(__file__).resolve().parents[2] / "models" / "references").glob("*.yaml"))
}

# Checked by hand against the transcribed documents (value, unit, direction, status).
# AMD platform figures read only in press or reseller copies are preliminary (README, Evidence policy).
KEY_FIGURES = {
    ("amd-mi300x-pollara400", "accelerator.count"): (8, "count", None, "published"),
    ("amd-mi300x-pollara400", "accelerator.memory"): (192, "GB", None, "published"),  # AMD MI300X product page
    ("amd-mi300x-pollara400", "accelerator.memory_total"): (1536, "GB", None, "derived"),
    # ROCm MI300 page: "peak memory bandwidth of the GPU is 5.3 TB per second"; 8 x 5.3 = 42.4 TB/s.
    ("amd-mi300x-pollara400", "accelerator.memory_bandwidth"): (5.3, "TB/s", None, "published"),
    ("amd-mi300x-pollara400", "accelerator.memory_bandwidth_total"): (42.4, "TB/s", None, "derived"),
    ("amd-mi300x-pollara400", "scale_up.links_per_accelerator"): (7, "count", None, "published"),
    ("amd-mi300x-pollara400", "scale_up.domain_size"): (8, "count", None, "derived"),
    ("amd-mi300x-pollara400", "scale_up.switch.count"): (0, "count", None, "derived"),
    ("amd-mi300x-pollara400", "scale_out.nic.speed"): (400, "Gb/s", "per_direction", "published"),
    # AMD's MI325X page: "Dedicated Memory Size 256 GB", "Peak Memory Bandwidth 6 TB/s"; 8 x 256 GB = 2,048 GB.
    ("amd-mi325x-pollara400", "accelerator.memory"): (256, "GB", None, "published"),
    ("amd-mi325x-pollara400", "accelerator.memory_total"): (2048, "GB", None, "derived"),
    ("amd-mi325x-pollara400", "accelerator.memory_bandwidth"): (6, "TB/s", None, "published"),
    ("amd-mi325x-pollara400", "accelerator.memory_bandwidth_total"): (48, "TB/s", None, "derived"),
    ("amd-mi355x-pollara400", "accelerator.memory"): (288, "GB", None, "preliminary"),
    ("amd-mi355x-pollara400", "accelerator.memory_total"): (2304, "GB", None, "derived"),
    ("amd-mi355x-pollara400", "accelerator.memory_bandwidth"): (8, "TB/s", None, "preliminary"),
    ("amd-helios", "accelerator.count"): (72, "count", None, "preliminary"),
    ("amd-helios", "accelerator.memory_total"): (31000, "GB", None, "preliminary"),
    ("amd-helios", "scale_up.domain_size"): (72, "count", None, "derived"),
    ("amd-helios", "scale_up.aggregate_bandwidth"): (260, "TB/s", "bidirectional", "preliminary"),
    ("amd-helios", "scale_out.nic.speed"): (800, "Gb/s", "per_direction", "preliminary"),
    ("amd-helios", "accelerator.memory"): (432, "GB", None, "preliminary"),
    # Helios, announced twice: 19.6 TB/s per GPU (2025-06-12) and 23.3 TB/s (Hot Chips 2026, 2026-08-24); rack
    # 1,400 TB/s (Computex 2026) and 1.7 PB/s (Hot Chips 2026). The later claim is taken, both stay cited.
    ("amd-helios", "accelerator.memory_bandwidth"): (23.3, "TB/s", None, "preliminary"),
    ("amd-helios", "accelerator.memory_bandwidth_total"): (1700, "TB/s", None, "preliminary"),
    # Hot Chips 2026: "1.8 TB/s per direction per GPU" over UALoE (stored bidirectional), four MI455X and a
    # single-socket CPU per tray -> 18 trays, 18 CPUs; "around 2900 FP4 dense PFLOPS" per rack.
    ("amd-helios", "scale_up.bandwidth_per_accelerator"): (3600, "GB/s", "bidirectional", "preliminary"),
    ("amd-helios", "tray.compute.accelerators"): (4, "count", None, "preliminary"),
    ("amd-helios", "tray.compute.count"): (18, "count", None, "derived"),
    ("amd-helios", "cpu.count"): (18, "count", None, "derived"),
    ("amd-helios", "accelerator.peak_dense_fp4_total"): (2_900_000, "TFLOP/s", None, "preliminary"),
    ("amd-helios", "scale_out.logical_design"): (None, None, None, "preliminary"),
    ("amd-mi355x-pollara400", "scale_out.logical_design"): (None, None, None, "preliminary"),
    # GB300 NVL72, Enterprise RA: "all 72 Blackwell Ultra GPUs", "4 Blackwell Ultra GPUs ... per tray" -> 18 trays;
    # "total aggregated bandwidth of 130 TB/s" (bidirectional: 72 x 1.8); "Full rack requiring up to 142 kW";
    # ConnectX-8 release notes "800Gb/s"; 4 per tray x 18 = 72 NICs -> 800 Gb/s per GPU; memory 288 GB from press.
    ("nvidia-gb300-nvl72", "accelerator.count"): (72, "count", None, "published"),
    ("nvidia-gb300-nvl72", "tray.compute.count"): (18, "count", None, "derived"),
    ("nvidia-gb300-nvl72", "cpu.count"): (36, "count", None, "derived"),
    ("nvidia-gb300-nvl72", "tray.switch.count"): (9, "count", None, "published"),
    ("nvidia-gb300-nvl72", "scale_up.aggregate_bandwidth"): (130, "TB/s", "bidirectional", "published"),
    # Stated per GPU on NVIDIA's NVLink page (1.8 TB/s); 130 TB/s / 72 is only the check.
    ("nvidia-gb300-nvl72", "scale_up.bandwidth_per_accelerator"): (1800, "GB/s", "bidirectional", "published"),
    # Enterprise RA: "8 power shelves of 33 kW"; Blackwell Ultra blog: "15 PetaFLOPS dense NVFP4" per GPU.
    ("nvidia-gb300-nvl72", "power.shelves"): (8, "count", None, "published"),
    ("nvidia-gb300-nvl72", "power.shelf_capacity"): (33, "kW", None, "published"),
    ("nvidia-gb300-nvl72", "accelerator.peak_dense_fp4"): (15_000, "TFLOP/s", None, "published"),
    ("nvidia-gb300-nvl72", "accelerator.peak_dense_fp4_total"): (1_080_000, "TFLOP/s", None, "derived"),
    ("nvidia-gb300-nvl72", "power.max_system"): (142, "kW", None, "published"),
    ("nvidia-gb300-nvl72", "scale_out.nic.speed"): (800, "Gb/s", "per_direction", "published"),
    ("nvidia-gb300-nvl72", "scale_out.nic.count"): (72, "count", None, "derived"),
    ("nvidia-gb300-nvl72", "scale_out.bandwidth_per_accelerator"): (800, "Gb/s", "per_direction", "derived"),
    ("nvidia-gb300-nvl72", "frontend.nic.speed"): (400, "Gb/s", "per_direction", "published"),
    ("nvidia-gb300-nvl72", "accelerator.memory_total"): (20736, "GB", None, "derived"),
    # DGX B300: "eight GPU configuration"; NIM notes "288GB HBM3e memory per GPU" -> 2,304 GB (not the page's 1,440);
    # SuperPOD Spectrum-X design "2x 400GbE" per GPU; NVLink page 1.8 TB/s x 8 = 14.4 TB/s.
    ("nvidia-dgx-b300", "accelerator.count"): (8, "count", None, "published"),
    ("nvidia-dgx-b300", "accelerator.memory"): (288, "GB", None, "published"),
    ("nvidia-dgx-b300", "accelerator.memory_total"): (2304, "GB", None, "derived"),
    ("nvidia-dgx-b300", "scale_out.nic.speed"): (400, "Gb/s", "per_direction", "published"),
    ("nvidia-dgx-b300", "scale_up.aggregate_bandwidth"): (14.4, "TB/s", "bidirectional", "derived"),
    # Vera Rubin NVL144 (Tom's Hardware): "144 Rubin GPUs (in 72 packages)", "288 GB HBM4", "36 Vera CPUs".
    ("nvidia-vera-rubin-nvl144", "accelerator.count"): (72, "count", None, "preliminary"),
    ("nvidia-vera-rubin-nvl144", "scale_up.domain_size"): (72, "count", None, "derived"),
    ("nvidia-vera-rubin-nvl144", "accelerator.memory"): (288, "GB", None, "preliminary"),
    ("nvidia-vera-rubin-nvl144", "accelerator.memory_total"): (20736, "GB", None, "derived"),
    ("nvidia-vera-rubin-nvl144", "cpu.count"): (36, "count", None, "preliminary"),
    # Dies apart from packages: NVIDIA's blog "two reticle-sized dies" per Blackwell Ultra GPU (72 x 2 = 144 in GB300
    # NVL72, 8 x 2 = 16 in DGX B300); Vera Rubin "144 Rubin GPUs (in 72 packages)" -> 2 per package.
    ("nvidia-gb300-nvl72", "accelerator.dies_per_package"): (2, "count", None, "published"),
    ("nvidia-gb300-nvl72", "accelerator.dies"): (144, "count", None, "derived"),
    ("nvidia-dgx-b300", "accelerator.dies"): (16, "count", None, "derived"),
    ("nvidia-vera-rubin-nvl144", "accelerator.dies"): (144, "count", None, "preliminary"),
    ("nvidia-vera-rubin-nvl144", "accelerator.dies_per_package"): (2, "count", None, "derived"),
    # DGX H100/H200 User Guide, Table 3: "10.2 kW max.".
    ("nvidia-dgx-h100", "power.max_system"): (10.2, "kW", None, "published"),
    # DGX A100 datasheet (640GB): 8x A100 80GB, 640GB, 6 NVSwitches, Dual AMD Rome 7742, 8x single-port ConnectX-6
    # VPI 200 Gb/s InfiniBand, 2x dual-port 200 Gb/s Ethernet, 6.5 kW max; HGX A100 blog: 12 NVLink ports, 600 GB/s
    # bi-directional; A100 datasheet (80GB SXM): 80 GB, 2,039 GB/s, BF16 312 | 624* TFLOPS.
    ("nvidia-dgx-a100", "accelerator.count"): (8, "count", None, "published"),
    ("nvidia-dgx-a100", "accelerator.memory"): (80, "GB", None, "published"),
    ("nvidia-dgx-a100", "accelerator.memory_total"): (640, "GB", None, "published"),
    ("nvidia-dgx-a100", "accelerator.memory_bandwidth"): (2.039, "TB/s", None, "published"),
    ("nvidia-dgx-a100", "accelerator.peak_dense_bf16"): (312, "TFLOP/s", None, "published"),
    ("nvidia-dgx-a100", "accelerator.peak_sparse_bf16"): (624, "TFLOP/s", None, "published"),
    ("nvidia-dgx-a100", "cpu.count"): (2, "count", None, "published"),
    ("nvidia-dgx-a100", "scale_up.switch.count"): (6, "count", None, "published"),
    ("nvidia-dgx-a100", "scale_up.links_per_accelerator"): (12, "count", None, "published"),
    ("nvidia-dgx-a100", "scale_up.bandwidth_per_accelerator"): (600, "GB/s", "bidirectional", "published"),
    ("nvidia-dgx-a100", "scale_up.aggregate_bandwidth"): (4.8, "TB/s", "bidirectional", "derived"),
    ("nvidia-dgx-a100", "scale_out.nic.count"): (8, "count", None, "published"),
    ("nvidia-dgx-a100", "scale_out.nic.speed"): (200, "Gb/s", "per_direction", "published"),
    ("nvidia-dgx-a100", "scale_out.bandwidth_per_accelerator"): (200, "Gb/s", "per_direction", "derived"),
    ("nvidia-dgx-a100", "frontend.nic.count"): (2, "count", None, "published"),
    ("nvidia-dgx-a100", "frontend.nic.speed"): (200, "Gb/s", "per_direction", "published"),
    ("nvidia-dgx-a100", "power.max_system"): (6.5, "kW", None, "published"),
    # Meta (Engineering at Meta 2024-03-12; Llama 3 paper 3.3.1): 24,576 GPUs each, 400 Gbps endpoints; RoCE cluster:
    # 8 GPUs per server, 16 per ToR, 3,072 per pod, 8 pods, three-layer Clos; 1,536 ToRs derived.
    ("meta-genai-24k-roce", "cluster.accelerators"): (24576, "count", None, "published"),
    ("meta-genai-24k-roce", "cluster.endpoint_speed"): (400, "Gb/s", "per_direction", "published"),
    ("meta-genai-24k-roce", "cluster.building_block.accelerators"): (8, "count", None, "published"),
    ("meta-genai-24k-roce", "cluster.building_blocks"): (3072, "count", None, "derived"),
    ("meta-genai-24k-roce", "fabric.tiers"): (3, "count", None, "published"),
    ("meta-genai-24k-roce", "fabric.leaf.accelerators"): (16, "count", None, "published"),
    ("meta-genai-24k-roce", "fabric.leaf.count"): (1536, "count", None, "derived"),
    ("meta-genai-24k-roce", "fabric.pod.accelerators"): (3072, "count", None, "published"),
    ("meta-genai-24k-roce", "fabric.pods"): (8, "count", None, "published"),
    ("meta-genai-24k-ib", "cluster.accelerators"): (24576, "count", None, "published"),
    ("meta-genai-24k-ib", "cluster.endpoint_speed"): (400, "Gb/s", "per_direction", "published"),
    ("meta-genai-24k-ib", "fabric.tiers"): (None, "count", None, "unknown"),
    # DGX SuperPOD GB200 network fabrics: "Each B200 GPU features 18 NVL5 links and has one dedicated NVL5 link
    # connectivity to each one of the 18 switch chips" (9 switch trays of 2 NVLink switch chips).
    ("nvidia-gb200-nvl72", "scale_up.switch.count"): (18, "count", None, "published"),
    ("nvidia-gb200-nvl72", "scale_up.links_per_accelerator"): (18, "count", None, "published"),
    # MSA Search NIM support matrix: "NVIDIA GB300 | 288" in its GPU Memory (GB) column.
    ("nvidia-gb300-nvl72", "accelerator.memory"): (288, "GB", None, "published"),
    # HGX B300 reference design: "9 NICs at 800 Gb/s bandwidth per GPU"; the DGX B300 SuperPOD: "2x 400GbE" per GPU.
    ("nvidia-dgx-b300", "scale_out.bandwidth_per_accelerator"): (800, "Gb/s", "per_direction", "published"),
    # HGX B300 reference design: "two 400 GbE ports" north/south per node; the SuperNICs per server are not counted.
    ("nvidia-dgx-b300", "frontend.nic.speed"): (400, "Gb/s", "per_direction", "published"),
    ("nvidia-dgx-b300", "scale_out.nic.count"): (None, "count", None, "unknown"),
    # Vera Rubin NVL72 reference architecture: "two 400 Gb/s ports" north/south per node (announced: preliminary);
    # the ConnectX-9 port rate is not stated there.
    ("nvidia-vera-rubin-nvl144", "frontend.nic.speed"): (400, "Gb/s", "per_direction", "preliminary"),
    ("nvidia-vera-rubin-nvl144", "scale_out.nic.speed"): (None, "Gb/s", "per_direction", "unknown"),
    # DGX B200 page: "64TB/s HBM3e bandwidth" for eight GPUs -> 8 TB/s each (a maintainer's 7.672 does not displace it).
    ("nvidia-dgx-b200", "accelerator.memory_bandwidth"): (8, "TB/s", None, "derived"),
    ("illustrative-h100-4096", "cluster.accelerators"): (4096, "count", None, "derived"),
    ("illustrative-h100-4096", "fabric.leaf.count"): (128, "count", None, "derived"),
    ("illustrative-h100-4096", "fabric.spine.count"): (128, "count", None, "derived"),
    ("illustrative-h100-4096", "fabric.core.count"): (64, "count", None, "derived"),
    ("illustrative-h100-4096", "fabric.bisection_bandwidth"): (819.2, "Tb/s", "per_direction", "derived"),
    ("illustrative-h100-4096", "cluster.endpoint_speed"): (400, "Gb/s", "per_direction", "published"),
}


def test_every_reference_compiles_with_its_kind(built_registry):
    found = {r["reference_id"]: r["kind"] for r in db_rows(built_registry, "SELECT * FROM reference_models")}
    assert found == REFERENCES


@pytest.fixture(scope="module")
def field_rows(built_registry) -> dict[tuple[str, str], list[dict]]:
    """Every compiled field's rows by (reference, field), read in one query for all the key figures."""
    rows: dict[tuple[str, str], list[dict]] = {}
    for r in db_rows(built_registry, "SELECT reference_id, field, value_number, unit, direction, status FROM fields"):
        rows.setdefault((r["reference_id"], r["field"]), []).append(r)
    return rows


@pytest.mark.parametrize(("key", "expected"), sorted(KEY_FIGURES.items()))
def test_key_figures(field_rows, key, expected):
    (row,) = field_rows.get(key, [])
    assert (row["value_number"], row["unit"], row["direction"], row["status"]) == pytest.approx(expected)


def test_a_derived_fields_text_is_a_plain_number_that_reads_back_as_its_value(built_registry):
    """`value_text` is what SQL users and every view read: a derived 1,080,000 TFLOP/s is '1080000', never
    '1.08e+06' (exponent notation), and it reads back as the stored number to six significant digits."""
    rows = db_rows(
        built_registry, "SELECT reference_id, field, value_text, value_number FROM fields WHERE status = 'derived'"
    )
    assert rows
    bad = [
        r
        for r in rows
        if "e" in r["value_text"].lower() or float(r["value_text"]) != pytest.approx(r["value_number"], rel=1e-5)
    ]
    assert not bad, bad[:5]


@pytest.mark.slow
def test_every_published_or_preliminary_field_audits_to_a_verified_hash(built_registry):
    cited = db_rows(
        built_registry, "SELECT reference_id, field FROM fields WHERE status IN ('published', 'preliminary')"
    )
    assert len(cited) > 80
    with open_tables(built_registry) as tables:  # opened once for all of them, as a notebook auditing many would
        for row in cited:
            result = audit(built_registry, row["reference_id"], row["field"], tables)
            assert result["provenance"], row
            assert not unverified(result), row


def test_announced_products_are_preliminary_and_shipping_ones_published(built_registry):
    statuses = db_rows(
        built_registry,
        "SELECT reference_id, form_factor, status, count(*) AS n FROM fields JOIN reference_models "
        "USING (reference_id) GROUP BY ALL",
    )
    helios = {r["status"] for r in statuses if r["reference_id"] == "amd-helios"}
    assert "published" not in helios and "preliminary" in helios
    # NVIDIA's shipping systems rest on NVIDIA documents. (Its network products may not: the Q3400 manual marks
    # itself preliminary, and the QM9700 port count is read in an engineer's kernel commit.)
    nvidia = {
        r["status"]
        for r in statuses
        if r["reference_id"] in ("nvidia-dgx-h100", "nvidia-dgx-a100", "nvidia-dgx-b200", "nvidia-gb200-nvl72")
    }
    assert "preliminary" not in nvidia
    q3400 = {r["status"] for r in statuses if r["reference_id"] == "nvidia-q3400"}
    assert "published" not in q3400 and "preliminary" in q3400
    rubin = {r["status"] for r in statuses if r["reference_id"] == "nvidia-vera-rubin-nvl144"}
    assert "published" not in rubin and "preliminary" in rubin
    # The Blackwell Ultra systems ship: a field of theirs is preliminary only where a press or reseller relay is its
    # sole source (README, Evidence policy), never because an NVIDIA document was downgraded.
    relayed = db_rows(
        built_registry,
        "SELECT reference_id, field, publisher_kind FROM field_provenance WHERE status = 'preliminary' "
        "AND reference_id IN ('nvidia-gb300-nvl72', 'nvidia-dgx-b300')",
    )
    assert all(r["publisher_kind"] in ("press", "reseller") for r in relayed), relayed
    # GB300 memory per GPU was press-only until NVIDIA's support matrix stated it: the NVIDIA document publishes it.
    assert ("nvidia-gb300-nvl72", "accelerator.memory") not in {(r["reference_id"], r["field"]) for r in relayed}


def test_illustrative_fields_rest_on_named_design_choices(built_registry):
    result = audit(built_registry, "illustrative-h100-4096", "fabric.leaf.count")
    assert result["status"] == "derived" and result["confidence"] == "assumed"
    params = [i for i in result["inputs"] if i["field"].startswith("param.")]
    assert [p["field"] for p in params] == ["param.leaf_down_ports"]
    assert params[0]["status"] == "design-choice" and params[0]["why"]
    server_fact = next(i for i in result["inputs"] if i["field"] == "cluster.building_block.scale_out_nics")
    assert server_fact["provenance"][0]["source_id"] == "nvidia-dgx-basepod-core-components"


def test_the_gib_label_is_kept_apart_from_decimal_gb(built_registry):
    (claim,) = db_rows(built_registry, "SELECT value_number, unit FROM claims WHERE rule_id = 'mi355x-vram'")
    assert claim["value_number"] == pytest.approx(288 * 2**30 / 1e9)  # 309.24 GB: what "288 GiB" means
    result = audit(built_registry, "amd-mi355x-pollara400", "accelerator.memory")
    assert result["value"] == 288 and result["chosen"].startswith("theregister-")
    assert "GiB" in result["choice_reason"]


def test_saved_queries_run(built_registry, cli):
    for path in sorted((built_registry.queries_dir).glob("*.sql")):
        result = cli("query", "--file", str(path), "--format", "json", root=built_registry.root)
        assert result.code == 0, (path, result.err)
        assert json.loads(result.out), path


@pytest.mark.slow
def test_compile_refuses_relabelling_the_illustrative_model_as_a_vendor_reference(extracted):
    path = extracted.references_dir / "illustrative-h100-4096.yaml"
    path.write_text(path.read_text().replace("kind: illustrative", "kind: vendor"))
    with pytest.raises(CompileError, match="permanently 'illustrative'.*never relabelled as a vendor reference"):
        stage.run(extracted)


@pytest.mark.slow
def test_compile_refuses_a_changed_title_or_an_unregistered_id(extracted):
    path = extracted.references_dir / "illustrative-h100-4096.yaml"
    original = path.read_text()
    path.write_text(original.replace("title: Illustrative 4,096-GPU", "title: NVIDIA 4,096-GPU"))
    with pytest.raises(CompileError, match=r"at \$\.title"):
        stage.run(extracted)
    path.write_text(original)
    (extracted.references_dir / "new-thing.yaml").write_text(
        original.replace("id: illustrative-h100-4096", "id: new-thing")
    )
    with pytest.raises(CompileError, match="has no permanent identity"):
        stage.run(extracted)


def test_helios_memory_bandwidth_announced_twice_is_kept_twice_dated(built_registry):
    per_gpu = audit(built_registry, "amd-helios", "accelerator.memory_bandwidth")
    rack = audit(built_registry, "amd-helios", "accelerator.memory_bandwidth_total")
    # Every claim stays cited with its source (the ids carry the announcement's date); the later one is taken.
    assert {p["source_id"] for p in per_gpu["provenance"]} == {
        "turtlesai-amd-mi400-advancing-ai-2025-06-12",
        "servethehome-amd-mi400-hot-chips-2026",
    }
    assert per_gpu["chosen"].startswith("servethehome-") and "2025-06-12" in per_gpu["choice_reason"]
    assert per_gpu["value"] == 23.3
    assert {p["source_id"] for p in rack["provenance"]} == {
        "tomshardware-amd-helios-computex-2026",
        "servethehome-amd-mi400-hot-chips-2026",
    }
    assert rack["chosen"].startswith("servethehome-") and rack["value"] == 1700


def test_connectx8_host_interface_keeps_both_cards_from_their_own_manuals(built_registry):
    (row,) = db_rows(
        built_registry,
        "SELECT value_text, status, conflict, resolved_by FROM fields "
        "WHERE reference_id = 'nvidia-connectx-8' AND field = 'nic.host_interface'",
    )
    assert row == {
        "value_text": "PCIe Gen6 through x16 edge connector",
        "status": "published",
        "conflict": True,
        "resolved_by": "take",
    }
    claims = db_rows(
        built_registry,
        "SELECT source_id, value_text FROM field_citations "
        "WHERE reference_id = 'nvidia-connectx-8' AND field = 'nic.host_interface' ORDER BY source_id",
    )
    assert [(c["source_id"], c["value_text"]) for c in claims] == [
        ("nvidia-connectx8-ocp3-supported-interfaces", "PCIe Gen 5.0 through x16 edge connector"),
        ("nvidia-connectx8-supernic-supported-interfaces", "PCIe Gen6 through x16 edge connector"),
    ]


def test_dgx_b300_keeps_the_port_rate_and_the_per_gpu_rate_apart_each_with_its_source(built_registry):
    port = audit(built_registry, "nvidia-dgx-b300", "scale_out.nic.speed")
    per_gpu = audit(built_registry, "nvidia-dgx-b300", "scale_out.bandwidth_per_accelerator")
    assert (port["value"], per_gpu["value"]) == (400, 800)
    assert port["chosen"].startswith("nvidia-dgx-superpod-b300-network-fabrics")
    assert {p["source_id"] for p in per_gpu["provenance"]} == {"nvidia-hgx-b300-enterprise-ra-abstract"}


@pytest.mark.parametrize(
    ("ref", "model", "source", "status"),
    [
        ("nvidia-dgx-b300", "ConnectX-8 SuperNIC", "nvidia-hgx-b300-enterprise-ra-physical-topologies", "published"),
        (
            "nvidia-vera-rubin-nvl144",
            "ConnectX-9 SuperNIC",
            "nvidia-vera-rubin-nvl72-ra-physical-topologies",
            "preliminary",
        ),
    ],
)
def test_scale_out_supernics_are_named_by_nvidias_reference_designs(built_registry, ref, model, source, status):
    # "the GPUs are connected ... through their respective NVIDIA ConnectX-8 SuperNICs" (HGX B300 design) and
    # "... their respective ConnectX-9 SuperNICs" (Vera Rubin NVL72 design, an announced platform: preliminary).
    found = audit(built_registry, ref, "scale_out.nic.model")
    assert (found["value"], found["status"]) == (model, status)
    assert {p["source_id"] for p in found["provenance"]} == {source}
    (row,) = db_rows(built_registry, f"SELECT publisher_kind, url FROM sources WHERE source_id = '{source}'")
    assert row["publisher_kind"] == "vendor-document" and row["url"].startswith("https://docs.nvidia.com/")


def test_a_maintainers_b200_memory_bandwidth_is_a_claim_of_its_own_kind_that_sets_no_vendor_field(built_registry):
    source = "pytorch-ao-pr-4002-b200-memory-bandwidth"
    (src,) = db_rows(
        built_registry, f"SELECT publisher_kind, status, published_on, url FROM sources WHERE source_id = '{source}'"
    )
    assert src == {
        "publisher_kind": "maintainer-statement",
        "status": "preliminary",
        "published_on": "2026-03-05",
        "url": "https://github.com/pytorch/ao/pull/4002",
    }
    (claim,) = db_rows(
        built_registry, f"SELECT field, value_number, unit, status FROM claims WHERE source_id = '{source}'"
    )
    assert claim == {
        "field": "accelerator.memory_bandwidth",
        "value_number": 7.672,
        "unit": "TB/s",
        "status": "preliminary",
    }
    # No reference cites it: NVIDIA's stated 64 TB/s over eight GPUs stays the B200's figure, with no conflict claimed.
    assert not db_rows(built_registry, f"SELECT * FROM field_citations WHERE source_id = '{source}'")
    (field,) = db_rows(
        built_registry,
        "SELECT value_number, status, conflict FROM fields "
        "WHERE reference_id = 'nvidia-dgx-b200' AND field = 'accelerator.memory_bandwidth'",
    )
    assert field["value_number"] == 8 and field["status"] == "derived" and not field["conflict"]
