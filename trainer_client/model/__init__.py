"""What touches the model: the policy and its optimizer (``policy``), log-probabilities
(``logprobs``), the GRPO loss (``grpo``), rollouts with vLLM or transformers (``rollout``), the
padded batch (``batch``), loading a pretrained or a tiny model (``pretrained``, ``tiny_model``)
and checkpoints (``checkpoint``). The run around it (config, steps, Ray workers, evaluation,
reports) is one level up."""
