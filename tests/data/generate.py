"""Generate the real TORCH_TRACE fixtures in tests/data/ with real PyTorch.

Each scenario is a small torch program. It is written into a fresh temporary
directory and run there with TORCH_TRACE pointing at a temporary trace dir, so
the logs carry no path of this checkout. The resulting log files are copied,
unchanged and with their torch-chosen names, into tests/data/<scenario>/.

Usage (with a Python that has torch 2.13.0 CPU installed):

    python tests/data/generate.py --python /path/to/venv/bin/python [SCENARIO ...]

The tests state what each scenario provokes (see tests/data/README.md); change
a program here and those expectations must change with it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent

COMMON = """
import os, torch
torch.manual_seed(0)
torch.set_num_threads(1)
"""

SCENARIOS: dict[str, str] = {}

# A training step (forward + backward through inductor), then a no_grad call
# that recompiles on grad mode.
SCENARIOS["train_step"] = """
class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))

model = MLP()
cmodel = torch.compile(model)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(4, 8), torch.randn(4, 4)
loss = torch.nn.functional.mse_loss(cmodel(x), y)
loss.backward()
opt.step()
with torch.no_grad():
    cmodel(x)
"""

# Graph breaks: print, an explicit graph_break, a data-dependent branch, and the
# same print break reached from two compiled functions (a duplicate reason), and
# a function that breaks twice (its first resume function calls the second).
SCENARIOS["graph_breaks"] = """
def noisy(x):
    print("side effect")
    return x + 1

@torch.compile(backend="eager")
def with_print(x):
    x = x * 2
    x = noisy(x)
    return x.sin()

@torch.compile(backend="eager")
def with_explicit_break(x):
    x = x.cos()
    torch._dynamo.graph_break()
    return x + 3

@torch.compile(backend="eager")
def with_branch(x):
    if x.sum() > 0:
        return x - 1
    return x + 1

@torch.compile(backend="eager")
def also_noisy(x):
    return noisy(x.exp())

@torch.compile(backend="eager")
def two_breaks(x):
    x = x + 1
    torch._dynamo.graph_break()
    x = x * 2
    torch._dynamo.graph_break()
    return x - 3

x = torch.ones(3)
with_print(x)
with_explicit_break(x)
with_branch(x)
also_noisy(x)
two_breaks(x)
"""

# Recompiles: a shape change, a dtype change and a python int change on f; g
# hits the recompile limit (set to 4) with a new dtype on every call.
SCENARIOS["recompiles"] = """
torch._dynamo.config.recompile_limit = 4

@torch.compile(backend="aot_eager")
def f(x, n):
    return x * n

f(torch.ones(4), 2)
f(torch.ones(8), 2)                          # size mismatch
f(torch.ones(8, dtype=torch.float64), 2)     # dtype mismatch
f(torch.ones(8, dtype=torch.float64), 3)     # python int n changed

@torch.compile(backend="eager")
def g(x):
    return x + 1

for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64):
    g(torch.ones(2, dtype=dtype))            # the 5th compile exceeds the limit
"""

# Dynamic shapes: mark_dynamic, unbacked symbols from .item() and nonzero().
SCENARIOS["dynamic"] = """
torch._dynamo.config.capture_scalar_outputs = True
torch._dynamo.config.capture_dynamic_output_shape_ops = True

@torch.compile(backend="aot_eager", dynamic=True)
def scale(x):
    return x * x.shape[0]

scale(torch.ones(5))

@torch.compile(backend="aot_eager")
def item_use(x):
    n = x.sum().item()
    return torch.ones(3) * n

item_use(torch.ones(3))

@torch.compile(backend="aot_eager")
def nz(x):
    return x.nonzero().sum()

nz(torch.tensor([0.0, 1.0, 2.0]))

@torch.compile(backend="aot_eager")
def guarded(x):
    if x.shape[0] > 4:
        return x * 2
    return x

y = torch.ones(8)
torch._dynamo.mark_dynamic(y, 0)
guarded(y)
"""

# Compile errors: fullgraph=True over a print (Unsupported), a backend that
# raises (BackendCompilerFailed), the same under suppress_errors, and
# torch._dynamo.reset() between them so compile ids repeat within the process.
SCENARIOS["compile_errors"] = """
def broken_backend(gm, example_inputs):
    raise RuntimeError("injected backend failure")

@torch.compile(fullgraph=True, backend="eager")
def strict_print(x):
    print("no graph breaks allowed")
    return x + 1

try:
    strict_print(torch.ones(2))
except Exception as e:
    print("expected:", type(e).__name__)

torch._dynamo.reset()

@torch.compile(backend=broken_backend)
def uses_broken(x):
    return x * 3

try:
    uses_broken(torch.ones(2))
except Exception as e:
    print("expected:", type(e).__name__)

torch._dynamo.reset()
torch._dynamo.config.suppress_errors = True

@torch.compile(backend=broken_backend)
def suppressed(x):
    return x - 3

suppressed(torch.ones(2))
"""

# FX-graph and AOTAutograd caches: the same program run twice in two processes
# sharing one TORCHINDUCTOR_CACHE_DIR (cold: misses, warm: hits).
SCENARIOS["cache"] = """
@torch.compile
def f(x, w):
    return (x @ w).relu().sum()

x = torch.randn(4, 4)
w = torch.randn(4, 4, requires_grad=True)
f(x, w).backward()
"""

# Compiled autograd: the backward graph is captured and compiled by dynamo.
SCENARIOS["compiled_autograd"] = """
torch._dynamo.config.compiled_autograd = True
model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))

@torch.compile(backend="aot_eager")
def step(x):
    loss = model(x).sum()
    loss.backward()
    return loss

step(torch.randn(2, 4))
"""

# torch.export: non-strict with a dynamic Dim, strict (traced by dynamo), and a
# strict export whose dynamic Dim the model specializes: a ConstraintViolationError
# in a compilation_metrics record that has no compile id (tlparse's [-/-]).
SCENARIOS["export"] = """
from torch.export import Dim, export

class M(torch.nn.Module):
    def forward(self, x, y):
        return (x + 1) @ y

class Specializes(torch.nn.Module):
    def forward(self, x):
        return x + torch.ones(4, 3)

batch = Dim("batch", min=2, max=64)
args = (torch.randn(4, 3), torch.randn(3, 5))
export(M(), args, dynamic_shapes={"x": {0: batch}, "y": None}, strict=False)
export(M(), args, strict=True)
try:
    export(Specializes(), (torch.randn(4, 3),), dynamic_shapes={"x": {0: batch}}, strict=True)
except Exception as error:  # torch._dynamo.exc.UserError: Constraints violated (batch)!
    print(type(error).__name__)
"""

# Distributed data parallel over gloo; `diverge` makes one rank recompile alone.
DDP_TEMPLATE = """
import sys
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP

WORLD = {world}
DIVERGE = {diverge}

class Net(torch.nn.Module):
    # A user module (dynamo skips torch.nn's own forward frames), with 1 MB of
    # parameters so DDPOptimizer splits the graph at bucket boundaries.
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(64, 4096)
        self.fc2 = torch.nn.Linear(4096, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))

def work(rank):
    torch.manual_seed(0)
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str({port})
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    ddp = DDP(Net(), bucket_cap_mb=1)
    cmodel = torch.compile(ddp, backend="{backend}")
    for step in range(2):
        batch = 6 if (DIVERGE and rank == 1 and step == 1) else 4
        cmodel(torch.randn(batch, 64)).sum().backward()
    dist.destroy_process_group()

if __name__ == "__main__":
    mp.spawn(work, nprocs=WORLD, join=True)
"""
SCENARIOS["ddp_2ranks"] = DDP_TEMPLATE.format(world=2, diverge=False, port=29511, backend="inductor")
SCENARIOS["ddp_4ranks_diverge"] = DDP_TEMPLATE.format(
    world=4, diverge=True, port=29512, backend="aot_eager"
)

# Functional collectives compiled by inductor on 3 ranks over gloo, with the
# per-op runtime/tensor estimates (LOG_TLPARSE=1) and the graph execution order
# recorded. Rank 1's `step` issues one more all_reduce (on a group of itself
# alone, so nothing hangs): its collective schedule differs. Rank 2 runs one
# more compiled graph (`tail`, no collective) at the end: its execution order
# differs and compile id 2/0 exists on rank 2 only.
SCENARIOS["collectives_3ranks"] = """
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import torch.multiprocessing as mp

WORLD = 3

def work(rank):
    torch.manual_seed(0)
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = "29514"
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    alone = [dist.new_group([r]) for r in range(WORLD)][rank]
    extra = rank == 1

    @torch.compile
    def step(x, w):
        y = funcol.all_reduce(x @ w, "sum", dist.group.WORLD)
        if extra:
            y = funcol.all_reduce(y, "max", alone)
        return torch.relu(y)

    @torch.compile
    def gather(x):
        return funcol.all_gather_tensor(x.cos(), 0, dist.group.WORLD).view(WORLD, *x.shape).sum(0)

    @torch.compile
    def tail(x):
        return x.sin() + 1

    with torch._inductor.debug.record_and_log_graph_execution_order():
        x, w = torch.randn(4, 8), torch.randn(8, 8)
        for _ in range(2):
            x = gather(step(x, w))
        if rank == 2:
            tail(x)
    dist.destroy_process_group()

if __name__ == "__main__":
    mp.spawn(work, nprocs=WORLD, join=True)
"""

# torch.export.draft_export, whose report tlparse --export renders: a data-dependent
# branch, a guard that specializes a dynamic dim, a custom op without a fake kernel
# and one whose fake kernel disagrees with the real one. Draft export writes its own
# log where TORCH_DTRACE points (see EXTRA_ENV).
SCENARIOS["draft_export"] = """
from torch.export import Dim, draft_export

@torch.library.custom_op("tlindex::no_fake", mutates_args=())
def no_fake(x: torch.Tensor) -> torch.Tensor:
    return x.clone()

@torch.library.custom_op("tlindex::bad_fake", mutates_args=())
def bad_fake(x: torch.Tensor) -> torch.Tensor:
    return x[1:].clone()

@bad_fake.register_fake
def _(x):
    return torch.empty_like(x)

class M(torch.nn.Module):
    def forward(self, x, y):
        n = y.item()
        if n > 2:  # data-dependent branch
            x = x * 2
        if x.shape[0] > 3:  # specializes the dynamic dim
            x = x + 1
        return no_fake(x) + 1, bad_fake(x)

ep = draft_export(M(), (torch.randn(4), torch.tensor(3)), dynamic_shapes={"x": {0: Dim("batch")}, "y": None})
assert len(ep._report.failures) == 5, ep._report
"""

# Inductor provenance tracking (INDUCTOR_PROVENANCE=1): which pre-grad nodes became
# which post-grad nodes and which kernels of the generated code.
SCENARIOS["provenance"] = """
class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(10, 16)
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x, a):
        x = self.fc1(x)
        x = torch.sigmoid(torch.relu(x)) * a
        return torch.nn.functional.gelu(self.fc2(x))

with torch.no_grad():
    torch.compile(Model())(torch.randn(8, 10), torch.randn(8, 16))
"""

# Closures and cells that graph-break: the resume functions of `inner` (a closure over
# three variables: its bytecode starts with COPY_FREE_VARS 3) and of `with_cell` (a local
# captured by a lambda: MAKE_CELL, LOAD_CLOSURE, LOAD_DEREF). Then torch._dynamo.reset()
# and two more functions, so compile ids 0/0 and 1/0 repeat in a second generation
# whose timing spans must stay with it.
SCENARIOS["closures"] = """
def make(k):
    scale = torch.tensor(2.0)
    offset = 3

    @torch.compile(backend="eager")
    def inner(x):
        y = x * scale + k
        torch._dynamo.graph_break()
        return y + offset + k

    return inner

@torch.compile(backend="eager")
def with_cell(x):
    y = x + 1
    twice = lambda: y * 2
    torch._dynamo.graph_break()
    y = y + 1
    return twice() + y

make(1)(torch.ones(3))
with_cell(torch.ones(3))
torch._dynamo.reset()

@torch.compile(backend="eager")
def after_reset(x):
    return x.sin() + 1

@torch.compile(backend="eager")
def after_reset_too(x):
    return x.cos() * 2

after_reset(torch.ones(3))
after_reset_too(torch.ones(3))
"""

# A rank that fails and is restarted: torchrun --max-restarts 1 with 2 ranks over gloo.
# In the first attempt rank 1 compiles `step` and raises after its first call, so torchrun
# stops both ranks and starts them again; the second attempt runs to the end. The folder
# holds four processes, two per rank, one attempt after the other (same rank in file names
# and envelopes, different pids, disjoint times).
SCENARIOS["rank_restart"] = """
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))

@torch.compile(backend="aot_eager")
def step(x):
    return (x * (rank + 1)).relu().sum()

@torch.compile(backend="aot_eager")
def later(x):
    return x.cos() + 1

step(torch.randn(4))
dist.barrier()
if attempt == 0 and rank == 1:
    raise RuntimeError("injected failure of rank 1 in the first attempt")
if attempt > 0:
    step(torch.randn(6))
    later(torch.randn(4))
    dist.barrier()
dist.destroy_process_group()
"""

# A training step compiled by inductor with provenance tracking (INDUCTOR_PROVENANCE=1):
# the forward and the backward each log their own node mappings, post-grad graph and code.
SCENARIOS["train_provenance"] = """
class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(10, 16)
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x):
        return torch.nn.functional.gelu(self.fc2(torch.relu(self.fc1(x))))

model = Model()
torch.compile(model)(torch.randn(8, 10)).sum().backward()
"""

# The same program twice, compiled by inductor with its caches off (both runs compile cold), from
# one directory: the second run sets ADD_BREAK=1 so `body` graph-breaks between its halves. `finish` is unchanged, but its
# output code carries AOT ids and kernel names from process-wide counters that the new
# compile shifts: a diff must not call it changed.
SCENARIOS["inductor_break_added"] = """
ADD_BREAK = os.environ.get("ADD_BREAK") == "1"

@torch.compile
def prepare(x):
    return (x * 2).sin()

@torch.compile
def body(x):
    y = x.cos() + 1
    if ADD_BREAK:
        torch._dynamo.graph_break()
    return (y * y).sum() + y

@torch.compile
def finish(x):
    return x.tanh().mean()

x = torch.randn(8)
finish(body(prepare(x)) * x)
"""

# vLLM's piecewise compilation, imitated (vLLM itself is not installed here): a custom torch.compile
# backend that logs vLLM's records with trace_structured as vLLM does (vllm_compilation_config,
# vllm_piecewise_split_graph, then per piece compile vllm_piecewise_compile_start and vllm_submod_N),
# splits the Dynamo graph at a custom attention op with split_module, and compiles each non-attention
# piece with Inductor for a dynamic range (1-16) and two sizes (4, 8), with a custom post-grad pass
# that dumps its graph (vllm_post_grad.0.NoopFusion). One compile id holds every piece compile.
SCENARIOS["vllm_piecewise"] = """
import copy, json
from torch._logging import trace_structured
from torch.fx.passes.split_module import split_module
from torch._inductor.compile_fx import compile_fx
from torch._inductor.custom_graph_pass import CustomGraphPass

@torch.library.custom_op("tlindex_vllm::attention", mutates_args=())
def attention(q: torch.Tensor) -> torch.Tensor:
    return q.softmax(-1)

@attention.register_fake
def _(q):
    return torch.empty_like(q)

class NoopFusion(CustomGraphPass):
    index = 0
    def __call__(self, graph):
        trace_structured("graph_dump", metadata_fn=lambda: {"name": f"vllm_post_grad.{self.index}.NoopFusion"},
                         payload_fn=lambda: str(graph))
    def uuid(self):
        return "noop-fusion"

class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(8, 8)
        self.l2 = torch.nn.Linear(8, 8)
    def forward(self, x):
        x = torch.ops.tlindex_vllm.attention(self.l1(x).relu())
        return torch.ops.tlindex_vllm.attention(self.l2(x) * 2) + 1

RANGES = [(1, 16, False, False), (4, 4, True, True), (8, 8, True, True)]

def vllm_like_backend(gm, example_inputs):
    config = {"model": "tiny", "mode": 3, "backend": "inductor", "splitting_ops": ["tlindex_vllm::attention"],
              "cudagraph_mode": "PIECEWISE", "compile_sizes": [4, 8], "compile_ranges_split_points": [16],
              "use_inductor_graph_partition": False, "inductor_passes": {"post_grad_custom_post_pass": "NoopFusion"}}
    trace_structured("artifact", metadata_fn=lambda: {"name": "vllm_compilation_config", "encoding": "json"},
                     payload_fn=lambda: json.dumps(config))
    part = [0]
    def split(node):
        if node.op == "call_function" and "attention" in str(node.target):
            part[0] += 1
            keep = part[0]
            part[0] += 1
            return keep
        return part[0]
    split_gm = split_module(gm, None, split, keep_original_order=True)
    trace_structured("graph_dump", metadata_fn=lambda: {"name": "vllm_piecewise_split_graph"},
                     payload_fn=lambda: split_gm.print_readable(print_output=False))
    # the inputs of each piece, from one run of the split graph
    inputs = {}
    def record(name):
        def hook(module, args):
            inputs[name] = args
        return hook
    pieces = [(name, mod) for name, mod in split_gm.named_children() if name.startswith("submod_")]
    handles = [mod.register_forward_pre_hook(record(name)) for name, mod in pieces]
    split_gm(*example_inputs)
    for h in handles:
        h.remove()
    compiled_pieces = [(name, mod) for name, mod in pieces if any(n.op == "call_module" or n.op == "call_function"
                                                                 and "attention" not in str(n.target)
                                                                 for n in mod.graph.nodes)]
    torch._inductor.config.post_grad_custom_post_pass = NoopFusion()
    for start, end, single, cudagraph in RANGES:
        for index, (name, mod) in enumerate(compiled_pieces):
            record_ = {"piecewise_index": index, "submod_name": name, "total_piecewise_compiles": len(compiled_pieces),
                       "compile_range_start": start, "compile_range_end": end, "is_single_size": single,
                       "is_cudagraph_capture_size": cudagraph}
            trace_structured("artifact", metadata_fn=lambda: {"name": "vllm_piecewise_compile_start", "encoding": "json"},
                             payload_fn=lambda: json.dumps(record_))
            trace_structured("graph_dump", metadata_fn=lambda: {"name": f"vllm_submod_{index}"},
                             payload_fn=lambda: mod.print_readable(print_output=False))
            args = inputs[name]
            if single:
                args = tuple(torch.randn(start, *a.shape[1:]) if isinstance(a, torch.Tensor) and a.dim() else a for a in args)
            compile_fx(copy.deepcopy(mod), list(args))
    return split_gm

model = Model()
with torch.no_grad():  # serving: inference graphs only
    torch.compile(model, backend=vllm_like_backend)(torch.randn(4, 8))
"""

# vLLM's piecewise compilation of two models in one process (as vLLM compiles a model and its draft
# model for speculative decoding): the imitation above, then a second model with its own config (model
# "tiny-draft", one size), so the trace holds two compile calls whose configs differ in two settings.
# It runs twice on one Inductor cache: the second start is warm, but the draft model's last piece
# changed (CHANGE_PIECE), so that piece alone misses the cache where the other pieces hit.
SCENARIOS["vllm_two_models"] = (
    SCENARIOS["vllm_piecewise"]
    .replace('config = {"model": "tiny",', 'config = {"model": MODEL,')
    .replace('"compile_sizes": [4, 8]', '"compile_sizes": [s for s, _, single, _ in RANGES if single]')
    .replace("RANGES = [", 'MODEL = "tiny"\nRANGES = [')
    + """
class Draft(Model):
    def forward(self, x):
        x = torch.ops.tlindex_vllm.attention(self.l1(x).sigmoid())
        x = torch.ops.tlindex_vllm.attention(self.l2(x) * 2)
        return x - (2 if os.environ.get("CHANGE_PIECE") else 1)

MODEL, RANGES = "tiny-draft", [(1, 16, False, False), (4, 4, True, True)]
with torch.no_grad():
    torch.compile(Draft(), backend=vllm_like_backend)(torch.randn(4, 8))
""")

# vLLM's piecewise compilation restarted by Dynamo after the backend began: the model's LayerNorm takes its
# eps as a float argument; the second call, with another eps, makes it a dynamic float that Dynamo turns
# into a tensor (specialize_float off, as vLLM runs), and Inductor's AOT tracing of the first piece cannot
# keep it one (TensorifyScalarRestartAnalysis). The backend had logged the config, the split graph and the
# first piece's start; Dynamo restarts with eps specialized, and the backend logs them all again, then
# compiles every piece. Compile 0/1's first attempt is an aborted vLLM compile call.
SCENARIOS["vllm_restart"] = (
    SCENARIOS["vllm_piecewise"]
    .replace("""    def forward(self, x):
        x = torch.ops.tlindex_vllm.attention(self.l1(x).relu())""", """    def forward(self, x, eps):
        x = torch.ops.tlindex_vllm.attention(torch.nn.functional.layer_norm(self.l1(x), (8,), eps=eps))""")
    .replace("args = tuple(torch.randn(start, *a.shape[1:]) if isinstance(a, torch.Tensor) and a.dim() else a for a in args)",
             "args = (torch.randn(start, *args[0].shape[1:]), *args[1:])  # the activations; the weights as they are")
    .replace("""model = Model()
with torch.no_grad():  # serving: inference graphs only
    torch.compile(model, backend=vllm_like_backend)(torch.randn(4, 8))""", """torch._dynamo.config.specialize_float = False
model = Model()
with torch.no_grad():  # serving: inference graphs only
    compiled = torch.compile(model, backend=vllm_like_backend)
    compiled(torch.randn(4, 8), 1e-5)
    compiled(torch.randn(4, 8), 1e-6)"""))
assert "eps=eps" in SCENARIOS["vllm_restart"] and "1e-6" in SCENARIOS["vllm_restart"] and "*args[1:]" in SCENARIOS["vllm_restart"]

# vLLM's custom post-grad pass on a whole graph (no piecewise split, no config record, as a vLLM build that
# logs only its passes writes): the trace holds the pass's graph dumps and no piece compile.
SCENARIOS["vllm_passes_only"] = (
    SCENARIOS["vllm_piecewise"]
    .replace("""def vllm_like_backend(gm, example_inputs):
""", """def vllm_like_backend(gm, example_inputs):
    torch._inductor.config.post_grad_custom_post_pass = NoopFusion()
    return compile_fx(gm, example_inputs)
"""))
assert "return compile_fx(gm, example_inputs)" in SCENARIOS["vllm_passes_only"]

# The same model trained once a day, four days (STEP 0-3, one process each, one trace dir): the runs a
# trend compares. Day 1 adds input shapes (a recompile, then dynamic shapes), day 2 a graph break
# (torch._dynamo.graph_break()), day 3 a deeper model (more compile time), a data-dependent branch (a
# second kind of graph break) and two config changes (an Inductor and a Dynamo setting). Inductor's cache
# is shared by the four days, as on one machine: unchanged graphs hit it.
SCENARIOS["series"] = """
STEP = int(os.environ["STEP"])
if STEP >= 3:
    torch._inductor.config.max_fusion_size = 16
    torch._dynamo.config.cache_size_limit = 16

class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(16, 16)

    def forward(self, x):
        return torch.relu(self.fc(x)) + x

model = torch.nn.Sequential(*[Block() for _ in range(6 if STEP >= 3 else 2)])

def train_step(x):
    y = model(x)
    if STEP >= 2:
        torch._dynamo.graph_break()
    y = y * 2
    if STEP >= 3 and y.sum() > 0:
        y = y - 1
    return y.sum()

compiled = torch.compile(train_step)
for rows in [4] + ([6, 8] if STEP >= 1 else []):
    compiled(torch.randn(rows, 16)).backward()
"""

# Environment a scenario's program runs with, beyond the common one ({trace}: the trace dir).
EXTRA_ENV = {"collectives_3ranks": {"LOG_TLPARSE": "1"}, "draft_export": {"TORCH_DTRACE": "{trace}"},
             "provenance": {"INDUCTOR_PROVENANCE": "1"}, "train_provenance": {"INDUCTOR_PROVENANCE": "1"},
             "inductor_break_added": {"TORCHINDUCTOR_FX_GRAPH_CACHE": "0", "TORCHINDUCTOR_AUTOGRAD_CACHE": "0"},
             "rank_restart": {"GLOO_SOCKET_IFNAME": "lo"}}

# Scenarios run by a launcher rather than as `python script.py` ({script}: the script's name).
LAUNCHERS = {"rank_restart": ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                              "--max-restarts", "1", "--monitor-interval", "0.2", "{script}"]}

# A graph break added in the middle of a function: the same program run twice in two
# processes from one directory (same file, same line numbers); the second run sets
# ADD_BREAK=1, so `body` breaks between its two halves (a resume function is compiled)
# and every later frame id moves by one. `tlindex diff` must match `prepare`, `body`
# and `finish` and report the break once. aot_eager keeps compile times small and
# stable, so timer noise does not read as a change.
SCENARIOS["break_added"] = """
ADD_BREAK = os.environ.get("ADD_BREAK") == "1"

@torch.compile(backend="aot_eager")
def prepare(x):
    return (x * 2).sin()

@torch.compile(backend="aot_eager")
def body(x):
    y = x.cos() + 1
    if ADD_BREAK:
        torch._dynamo.graph_break()
    return (y * y).sum() + y

@torch.compile(backend="aot_eager")
def finish(x):
    return x.tanh().mean()

x = torch.randn(8)
finish(body(prepare(x)) * x)
"""

# Scenarios whose program runs more than once into the same trace dir, with the
# environment of each run.
RUNS = {"series": [{"STEP": str(step)} for step in range(4)], "cache": [{}, {}], "vllm_two_models": [{}, {"CHANGE_PIECE": "1"}], "break_added": [{}, {"ADD_BREAK": "1"}],
        "inductor_break_added": [{}, {"ADD_BREAK": "1"}]}


def program(name: str) -> str:
    """The source of a scenario's program, as run."""
    return textwrap.dedent(COMMON) + textwrap.dedent(SCENARIOS[name])


def run_scenario(name: str, python: str, out_root: Path) -> list[Path]:
    """Run one scenario in a temporary directory; copy its logs to out_root/name."""
    script_text = program(name)
    with tempfile.TemporaryDirectory(prefix="tlindex-gen-") as tmp:
        tmp_path = Path(tmp)
        script = tmp_path / f"{name}.py"
        script.write_text(script_text)
        trace_dir = tmp_path / "trace"
        env = dict(os.environ)
        env.update(
            TORCH_TRACE=str(trace_dir),
            TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor_cache"),
            TORCHINDUCTOR_FX_GRAPH_CACHE="1",
            TORCHINDUCTOR_AUTOGRAD_CACHE="1",
            OMP_NUM_THREADS="1",
            PYTHONDONTWRITEBYTECODE="1",
        )
        env.update({k: v.format(trace=trace_dir) for k, v in EXTRA_ENV.get(name, {}).items()})
        for run_env in RUNS.get(name, [{}]):
            args = [arg.format(script=script.name) for arg in LAUNCHERS.get(name, ["{script}"])]
            proc = subprocess.run(
                [python, *args], cwd=tmp_path, env={**env, **run_env}, capture_output=True, text=True,
                timeout=900,
            )
            if proc.returncode != 0:
                raise SystemExit(f"{name} failed:\n{proc.stdout}\n{proc.stderr}")
        dest = out_root / name
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(parents=True)
        logs = sorted(trace_dir.iterdir())
        for log in logs:
            shutil.copy2(log, dest / log.name)
        return [dest / log.name for log in logs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="*", help="default: all")
    parser.add_argument("--python", default=sys.executable, help="a Python with torch 2.13.0")
    parser.add_argument("--out", type=Path, default=HERE)
    args = parser.parse_args()
    for name in args.scenarios or list(SCENARIOS):
        for log in run_scenario(name, args.python, args.out):
            print(f"{log.relative_to(args.out)}\t{log.stat().st_size}")


if __name__ == "__main__":
    main()
