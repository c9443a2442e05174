"""The real-engine scripts' default ports are all different, so CI's stage can run their servers side by side.

CI starts vLLM, the multimodal vLLM and llama-server at once (scripts/ci_real_engine_stage.sh); two
scripts written apart once chose the same default, and the later start found the port taken.
"""

from __future__ import annotations

import re
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
DEFAULT_PORT = re.compile(r'^PORT="\$\{(\w+):-(\d+)\}"', re.MULTILINE)


def test_every_engine_script_has_a_default_port_of_its_own() -> None:
    ports: dict[str, list[str]] = {}
    for script in sorted(SCRIPTS.glob("*.sh")):
        for _, port in DEFAULT_PORT.findall(script.read_text(encoding="utf-8")):
            ports.setdefault(port, []).append(script.name)
    assert len(ports) >= 4, ports  # vLLM, the multimodal vLLM, llama-server, llama-cpp-python's server
    shared = {port: names for port, names in ports.items() if len(names) > 1}
    assert not shared, f"engine scripts share a default port: {shared}"
