"""flash-linear-attention's fused_recurrent_gated_delta_rule (Triton), the kernel Qwen3-Next's decode calls, as a
library baseline: one step (T = 1) with its in-kernel q/k L2 norm. Needs fla (skipped when absent)."""

from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule

BASELINE = "fla-core"  # read by solbench (never imported): the record names the library and its version
REQUIRES = ["fla"]  # read by solbench (never imported) to skip this file when it is not installed


def run(q, k, v, g, beta, state):
    # fla takes [B, T, H, ...]: a time axis of one. g is the log-decay and beta the post-sigmoid strength, as
    # here (no gate or sigmoid in the kernel); the state is [K, V] (not V-first), read from initial_state and
    # written to a new float32 tensor, so the input state is left as it is.
    out, state_out = fused_recurrent_gated_delta_rule(
        q[:, None], k[:, None], v[:, None], g[:, None], beta=beta[:, None], scale=q.shape[-1] ** -0.5,
        initial_state=state, output_final_state=True, use_qk_l2norm_in_kernel=True)
    return out[:, 0], state_out
