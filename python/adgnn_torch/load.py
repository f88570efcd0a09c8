"""Reading a file of `adgnn export` and rebuilding its model.

The file is a dict that torch.load reads with weights_only=True (trainer/include/adgnn/predict.h):
"format" ("adgnn-export"), "epoch", "config" (the model's settings), "train_config" (YAML),
"state_dict" (our parameter and buffer names, our layouts) and, for AD models under linear or log
normalisation, "benefit_range" (float64 [min, max] of log eps_hat over the training graph).
"""
from typing import Optional, Union
import os

import torch

from .adaptive import AdaptiveGNN
from .layers import BACKBONES
from .plain import PlainGNN
from .stack import LayerStack

VARIANTS = ("plain", "ad", "ad_fast", "ad_sharp")
NORMALISATIONS = ("linear", "log", "rank")
CONFIG_KEYS = ("backbone", "variant", "in_dim", "hidden", "out_dim", "layers", "t_max", "heads",
               "batchnorm", "lambda", "normalisation", "heuristic", "degree_threshold",
               "dirgnn_alpha", "float64")


def read_export(path: Union[str, os.PathLike]) -> dict:
    """The export's dict; ValueError naming the file for anything that is not an adgnn export."""
    with open(path, "rb") as f:
        head = f.read(8)
    if head.startswith(b"\x89HDF"):
        raise ValueError(f"{path}: not an adgnn export but an HDF5 file (an adgnn checkpoint? "
                         f"`adgnn export --checkpoint {path} -o model.pt` converts one)")
    if not head.startswith(b"PK"):
        raise ValueError(f"{path}: not an adgnn export (not the zip archive torch.save writes)")
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises several types for a file that is not its zip archive
        raise ValueError(f"{path}: not an adgnn export (torch.load: {str(e).splitlines()[0]})") from None
    if not isinstance(data, dict) or data.get("format") != "adgnn-export":
        what = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise ValueError(f"{path}: not an adgnn export (format {what!r}, expected 'adgnn-export')")
    for key in ("config", "state_dict"):
        if not isinstance(data.get(key), dict):
            raise ValueError(f"{path}: an adgnn export without its {key!r} dict")
    missing = [k for k in CONFIG_KEYS if k not in data["config"]]
    if missing:
        raise ValueError(f"{path}: config lacks {', '.join(missing)}")
    return data


def check_supported(config: dict, where: str) -> None:
    """ValueError naming the setting for any setting this reference does not implement."""
    if config["backbone"] not in BACKBONES:
        raise ValueError(f"{where}: backbone {config['backbone']!r} is not supported ({', '.join(BACKBONES)})")
    variant = config["variant"]
    if variant not in VARIANTS:
        raise ValueError(f"{where}: variant {variant!r} is not supported ({', '.join(VARIANTS)})")
    if variant in ("ad_fast", "ad_sharp") and config["heuristic"] != "degree":
        raise ValueError(f"{where}: heuristic {config['heuristic']!r} is not supported by adgnn_torch "
                         f"(only 'degree', the degree product, for ad_fast and ad_sharp)")
    if variant != "plain" and config["normalisation"] not in NORMALISATIONS:
        raise ValueError(f"{where}: normalisation {config['normalisation']!r} is not supported "
                         f"({', '.join(NORMALISATIONS)})")
    if variant != "plain" and int(config["degree_threshold"]) > 0:
        raise ValueError(f"{where}: degree_threshold is only defined for variant plain")


def load(path: Union[str, os.PathLike], dtype: Optional[torch.dtype] = None) -> LayerStack:
    """The model of an `adgnn export` file, in eval mode: model(x, edge_index) -> logits [N, C],
    edge_index being the graph's stored directed edges [2, E] (int64) in node order; after a call,
    model.last_depth holds T(v) (int64 [N]) and, for AD models, model.last_eps the normalised depth
    benefit. dtype: the type it computes in (None: the trained model's, float32 or float64);
    float64 on float32 weights computes the same function with less rounding."""
    data = read_export(path)
    config, state = data["config"], data["state_dict"]
    check_supported(config, str(path))
    if config["variant"] == "plain":
        model = PlainGNN(config)
    else:
        model = AdaptiveGNN(config, data.get("benefit_range"))
    used = model.load_adgnn_state(state)
    unknown = sorted(set(state) - used)
    if unknown:
        raise ValueError(f"{path}: state_dict entries the {config['backbone']} {config['variant']} "
                         f"model does not have: {', '.join(unknown)}")
    model.to(dtype or (torch.float64 if config["float64"] else torch.float32))
    model.config, model.epoch = dict(config), int(data.get("epoch", 0))
    model.train_config = data.get("train_config", "")
    return model.eval().requires_grad_(False)
