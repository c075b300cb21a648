"""Run by NeMo-Gym's own interpreter (its venv), not imported by the bench: resolves the
released ``math_with_judge`` resources server's config the way ``ng_run`` does for each child
(``nemo_gym.global_config.GlobalConfigDictParser`` over ``configs/math_with_judge.yaml``, no
model server: the parser's own ``NO_MODEL_GLOBAL_CONFIG_DICT``), with the server and the head
server on loopback ports, and prints ``{"dir": <the server's folder>, "config": <the YAML
that ng_run puts in NEMO_GYM_CONFIG_DICT>}``. ``should_use_judge`` is false in that file, as
shipped: the library verdict is final and no LLM judge is called.

usage: python nemo_gym_config.py PORT HEAD_PORT
"""

import json
import sys
from pathlib import Path

import resources_servers
from nemo_gym.global_config import GlobalConfigDictParser, GlobalConfigDictParserConfig
from omegaconf import OmegaConf

NAME = "math_with_judge"


def main() -> None:
    port, head_port = int(sys.argv[1]), int(sys.argv[2])
    folder = Path(next(iter(resources_servers.__path__))) / NAME
    shipped = OmegaConf.load(folder / "configs" / f"{NAME}.yaml")
    assert shipped[NAME]["resources_servers"][NAME]["should_use_judge"] is False
    initial = OmegaConf.merge(
        GlobalConfigDictParserConfig.NO_MODEL_GLOBAL_CONFIG_DICT,
        {NAME: shipped[NAME]},
        {NAME: {"resources_servers": {NAME: {"host": "127.0.0.1", "port": port}}},
         "head_server": {"host": "127.0.0.1", "port": head_port}})
    parsed = GlobalConfigDictParser().parse(GlobalConfigDictParserConfig(
        initial_global_config_dict=initial, skip_load_from_cli=True, skip_load_from_dotenv=True))
    print(json.dumps({"dir": str(folder), "config": OmegaConf.to_yaml(parsed)}))


if __name__ == "__main__":
    main()
