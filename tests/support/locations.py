"""Where the tests find their inputs: ../shared beside the project, and the shipped sample."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"
REAL_PCAPS = SHARED / "pcaps" / "real"
SAMPLE = ROOT / "pcaps" / "kernel_vxlan.pcap"
