"""Generate the real TORCH_TRACE fixtures in tests/data/ with real PyTorch.

Each scenario is a small torch program. It is written into a fresh temporary
directory and run there with TORCH_TRACE pointing at a temporary trace dir, so
the logs carry no path of this checkout. The resulting log files are copied,
unchanged and with their torch-chosen names, into OUT/<scenario>/.

Two sets of logs live here:

* the sample set, tests/data/<scenario>/, written by torch 2.13.0 (the tests
  describe these logs one by one); regenerate with a Python that has torch 2.13.0:

      python tests/data/generate.py --python /path/to/venv/bin/python --out tests/data [SCENARIO ...]

* the version matrix, tests/data/versions/<torch version>/<scenario>/, one
  folder per torch release. Adding a release is one command (the version is
  asked of the Python given, and the folder named after it):

      python tests/data/generate.py --python /path/to/venv/bin/python [SCENARIO ...]

  In versions/2.13.0/ only the scenarios that are not in the sample set run
  (the sample set is 2.13.0's). A scenario that needs a newer torch than the
  Python has (MIN_TORCH) is skipped with a message, and one whose logs pass
  MAX_VERSION_BYTES is not kept. A scenario that fails is said, the others run.

The tests state what each scenario provokes (see tests/data/README.md); change
a program here and those expectations must change with it.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent
VERSIONS = HERE / "versions"
SAMPLE_VERSION = "2.13.0"  # the torch of the sample set, tests/data/<scenario>/

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

# The sample set: the scenarios whose torch 2.13.0 logs are tests/data/<scenario>/.
SAMPLE_SET = tuple(SCENARIOS)

# --- Scenarios of the version matrix (tests/data/versions/<torch version>/ only) ---

# Two ranks over gloo compile the same model; rank 0 first runs a non-strict torch.export of it. From
# torch 2.15 the export runs inside a compile context that takes a Dynamo frame id, so rank 0's compile of
# the model is frame 1 where rank 1's is frame 0 (the same compile, numbered one off).
SCENARIOS["export_in_ranks"] = """
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.export import Dim

WORLD = 2

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x):
        return torch.relu(self.fc(x)) * 2

def work(rank):
    torch.manual_seed(0)
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = "29516"
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    model = Net()
    if rank == 0:
        torch.export.export(model, (torch.randn(4, 8),), dynamic_shapes={"x": {0: Dim("batch", min=2)}}, strict=False)
    compiled = torch.compile(model, backend="aot_eager")

    @torch.compile(backend="aot_eager")
    def loss(y):
        return (y * y).mean()

    for _ in range(2):
        loss(compiled(torch.randn(4, 8)))
    dist.barrier()
    dist.destroy_process_group()

if __name__ == "__main__":
    mp.spawn(work, nprocs=WORLD, join=True)
"""

# torch.export without torch.compile: a non-strict export with a dynamic Dim, a second non-strict export whose
# Dim the model specializes (ConstraintViolation, caught), and an AOTInductor compile of the first exported
# program (loaded and run). From torch 2.15 these export contexts carry compile ids but have no dynamo_start.
SCENARIOS["export_contexts"] = """
from torch.export import Dim, export

class M(torch.nn.Module):
    def forward(self, x, y):
        return (x + 1) @ y

class Specializes(torch.nn.Module):
    def forward(self, x):
        return x + torch.ones(4, 3)

batch = Dim("batch", min=2, max=64)
args = (torch.randn(4, 3), torch.randn(3, 5))
ep = export(M(), args, dynamic_shapes={"x": {0: batch}, "y": None}, strict=False)
try:
    export(Specializes(), (torch.randn(4, 3),), dynamic_shapes={"x": {0: batch}}, strict=False)
except Exception as error:  # the batch Dim specialized to 4: constraints violated
    print("expected:", type(error).__name__)
package = torch._inductor.aoti_compile_and_package(ep, package_path=os.path.abspath("m.pt2"))
print(torch._inductor.aoti_load_package(package)(*args).shape)
"""

# torch's mega-cache: process 1 (PHASE=save) compiles with inductor and saves torch.compiler.save_cache_artifacts();
# process 2 (PHASE=load, a fresh process with an empty inductor cache dir of its own) loads them with
# torch.compiler.load_cache_artifacts() and runs with caching precompile: a warm start whose Dynamo output
# comes from the precompile cache. Two processes, two logs. (A warm start like this one was said to crash
# torch 2.13 and 2.14.1 in torch/_dynamo/package.py load_guards_state; this program runs on both.)
SCENARIOS["mega_cache_warm"] = """
PHASE = os.environ["PHASE"]
os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.abspath(f"inductor_cache_{PHASE}")
if hasattr(torch._dynamo.config, "caching_precompile"):
    torch._dynamo.config.caching_precompile = True

class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))

model = MLP()
if PHASE == "load":
    with open("mega_cache.bin", "rb") as file:
        print("loaded:", torch.compiler.load_cache_artifacts(file.read()))
compiled = torch.compile(model)
with torch.no_grad():
    compiled(torch.randn(4, 8))
if PHASE == "save":
    artifacts, info = torch.compiler.save_cache_artifacts()
    print("saved:", info)
    with open("mega_cache.bin", "wb") as file:
        file.write(artifacts)
"""

# Control flow operators inside torch.compile: torch.cond, while_loop, and nested_compile_region (a region
# called twice, with a backward whose tangents differ in strides) where the torch has it.
SCENARIOS["control_flow"] = """
from torch._higher_order_ops.while_loop import while_loop

@torch.compile(backend="aot_eager", fullgraph=True)
def branchy(x):
    return torch.cond(x.sum() > 0, lambda x: x.sin(), lambda x: x.cos(), (x,))

def cond_fn(i, x):
    return i < 3

def body_fn(i, x):
    return i + 1, x * 2

@torch.compile(backend="aot_eager", fullgraph=True)
def looped(x):
    return while_loop(cond_fn, body_fn, (torch.tensor(0), x))

branchy(torch.ones(4))
branchy(-torch.ones(4))
looped(torch.ones(4))

if hasattr(torch.compiler, "nested_compile_region"):
    @torch.compiler.nested_compile_region
    def block(x, w):
        return torch.relu(x @ w)

    # the second call's output is used transposed: its backward tangent has other strides than the first's, so
    # the region's backward is traced twice (2.15: an invoke_subgraph_backward_duplicate artifact)
    @torch.compile(backend="aot_eager")
    def twice(x, w, c):
        return (block(x, w) * c).sum() + (block(x, w).t() * c).sum()

    w = torch.randn(4, 4, requires_grad=True)
    twice(torch.randn(4, 4), w, torch.randn(4, 4)).backward()
"""

# FlexAttention compiled by inductor on CPU: a forward (causal block mask, a score_mod), then a backward,
# which CPU does not support on every torch (2.15: "NotImplementedError: FlexAttention does not support
# backward on CPU"): the error is caught so the process finishes.
SCENARIOS["flex_attention"] = """
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx

def relative(score, b, h, q_idx, kv_idx):
    return score + (q_idx - kv_idx) * 0.01

q, k, v = (torch.randn(1, 2, 128, 16) for _ in range(3))
mask = create_block_mask(causal, 1, 1, 128, 128, device="cpu")
flex = torch.compile(flex_attention)
with torch.no_grad():
    flex(q, k, v, score_mod=relative, block_mask=mask)
q.requires_grad_()
try:
    flex(q, k, v, score_mod=relative, block_mask=mask).sum().backward()
    print("backward ran")
except Exception as error:
    print("expected:", type(error).__name__, str(error).splitlines()[0][:200])
"""

# Unbacked symbols: .item() (capture_scalar_outputs) and nonzero() (capture_dynamic_output_shape_ops), with
# torch._check on them.
SCENARIOS["unbacked"] = """
torch._dynamo.config.capture_scalar_outputs = True
torch._dynamo.config.capture_dynamic_output_shape_ops = True

@torch.compile(backend="aot_eager", fullgraph=True)
def head(x, n):
    k = n.item()
    torch._check(k >= 1)
    torch._check(k <= x.shape[0])
    return x[:k].sum() * k

@torch.compile(backend="aot_eager", fullgraph=True)
def positive(x):
    index = x.nonzero()
    torch._check(index.shape[0] > 0)
    return x[index.squeeze(1)].mean()

head(torch.arange(8.0), torch.tensor(3))
positive(torch.tensor([0.0, 1.0, 0.0, 2.0]))
"""

# Recompile limits and stances: f exceeds recompile_limit (2) with a new dtype per call and runs eagerly (the
# default behaviour); g recompiles under set_stance("fail_on_recompile") (an error, caught); h exceeds the
# limit with fail_on_recompile_limit_hit = True (FailOnRecompileLimitHit, caught).
SCENARIOS["recompile_limit_stances"] = """
torch._dynamo.config.recompile_limit = 2
DTYPES = (torch.float32, torch.float64, torch.float16)

@torch.compile(backend="eager")
def f(x):
    return x + 1

for dtype in DTYPES:
    f(torch.ones(2, dtype=dtype))            # the 3rd compile exceeds the limit: eager from then on

@torch.compile(backend="eager")
def g(x):
    return x * 2

g(torch.ones(2))
with torch.compiler.set_stance("fail_on_recompile"):
    try:
        g(torch.ones(2, dtype=torch.float64))
    except Exception as error:
        print("expected:", type(error).__name__)

torch._dynamo.config.fail_on_recompile_limit_hit = True

@torch.compile(backend="eager")
def h(x):
    return x - 1

for dtype in DTYPES:
    try:
        h(torch.ones(2, dtype=dtype))
    except Exception as error:
        print("expected:", type(error).__name__)
"""

# The oldest torch a scenario runs on (older ones skip it, with a message): {scenario: "2.15.0"}. Every
# scenario here runs on 2.13.0, 2.14.1 and 2.15.0.
MIN_TORCH: dict[str, str] = {}

# Scenarios whose program runs more than once into the same trace dir, with the
# environment of each run.
RUNS = {"series": [{"STEP": str(step)} for step in range(4)], "cache": [{}, {}],
        "vllm_two_models": [{}, {"CHANGE_PIECE": "1"}], "break_added": [{}, {"ADD_BREAK": "1"}],
        "inductor_break_added": [{}, {"ADD_BREAK": "1"}], "mega_cache_warm": [{"PHASE": "save"}, {"PHASE": "load"}]}


def program(name: str) -> str:
    """The source of a scenario's program, as run."""
    return textwrap.dedent(COMMON) + textwrap.dedent(SCENARIOS[name])


class ScenarioFailed(Exception):
    """A scenario's program exited non-zero or ran too long: nothing of it is copied."""


class ScenarioTooBig(Exception):
    """A scenario of the version matrix wrote more than MAX_VERSION_BYTES: nothing of it is copied."""


# The version matrix keeps a scenario's logs up to this size (the sample set has two bigger ones, series and
# vllm_two_models: their copies per version would only grow the checkout).
MAX_VERSION_BYTES = 5_000_000


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
            try:
                proc = subprocess.run(
                    [python, *args], cwd=tmp_path, env={**env, **run_env}, capture_output=True, text=True,
                    timeout=900,
                )
            except subprocess.TimeoutExpired as stopped:
                raise ScenarioFailed(f"{name} ran over {stopped.timeout} s") from None
            if proc.returncode != 0:
                raise ScenarioFailed(f"{name} failed:\n{proc.stdout}\n{proc.stderr[-20000:]}")
            for line in proc.stdout.splitlines():  # what the program says it provoked ("expected: ...")
                print(f"  {name}: {line}")
        logs = sorted(trace_dir.iterdir())
        size = sum(log.stat().st_size for log in logs)
        if out_root.resolve().parent == VERSIONS and size > MAX_VERSION_BYTES:
            raise ScenarioTooBig(f"{name}: not kept: its logs are {size:,} bytes, over {MAX_VERSION_BYTES:,}")
        dest = out_root / name
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(parents=True)
        for log in logs:
            shutil.copy2(log, dest / log.name)
        return [dest / log.name for log in logs]


def torch_version(python: str) -> str:
    """The torch version the Python has, without its local part: 2.15.0+cu132 -> 2.15.0."""
    proc = subprocess.run([python, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{python} cannot import torch:\n{proc.stderr}")
    return proc.stdout.strip().split("+")[0]


def release(version: str) -> tuple[int, ...]:
    """2.15.0 -> (2, 15, 0); 2.16.0.dev20260101 -> (2, 16, 0)."""
    return tuple(int(part) for part in re.findall(r"\d+", version)[:3])


def chosen(names: list[str], version: str, out: Path) -> list[str]:
    """The scenarios to run for `version` into `out`: those named (default: all), less those its torch is too old
    for; into the sample set (tests/data itself) the sample set's only, and into versions/<SAMPLE_VERSION>/ by
    default only those the sample set lacks. Each one left out is said."""
    sample = out.resolve() == HERE
    if sample and version != SAMPLE_VERSION:
        raise SystemExit(f"tests/data holds torch {SAMPLE_VERSION}'s logs; torch {version} writes into "
                         f"tests/data/versions/ (leave out --out)")
    unknown = [name for name in names if name not in SCENARIOS]
    if unknown:
        raise SystemExit(f"no such scenario: {', '.join(unknown)} (known: {', '.join(SCENARIOS)})")
    runs = []
    for name in names or list(SCENARIOS):
        if sample and name not in SAMPLE_SET:
            print(f"{name}: skipped: not in the sample set (its logs go to tests/data/versions/<torch version>/)")
        elif not names and not sample and version == SAMPLE_VERSION and name in SAMPLE_SET:
            print(f"{name}: skipped: torch {version}'s log of it is the sample set's (tests/data/{name}/)")
        elif name in MIN_TORCH and release(version) < release(MIN_TORCH[name]):
            print(f"{name}: skipped: needs torch >= {MIN_TORCH[name]}, {version} is older")
        else:
            runs.append(name)
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="*", help="default: all")
    parser.add_argument("--python", default=sys.executable, help="a Python with torch installed")
    parser.add_argument("--out", type=Path, default=VERSIONS / "auto",
                        help="where the scenario folders go; a last part `auto` is the torch version of --python "
                             "(default: tests/data/versions/auto); tests/data itself is torch 2.13.0's sample set")
    args = parser.parse_args()
    version = torch_version(args.python)
    out = args.out.parent / version if args.out.name == "auto" else args.out
    if out.resolve().parent == VERSIONS and out.name != version:
        raise SystemExit(f"{args.python} has torch {version}, not {out.name}: name --out {out.parent / version}")
    print(f"torch {version} -> {out}")
    failed = []
    for name in chosen(args.scenarios, version, out):
        try:
            logs = run_scenario(name, args.python, out)
        except ScenarioFailed as error:  # said, and the other scenarios still run
            print(error, file=sys.stderr)
            failed.append(name)
            continue
        except ScenarioTooBig as error:
            print(f"{error}: skipped")
            continue
        for log in logs:
            print(f"{log.relative_to(out)}\t{log.stat().st_size}")
    if failed:
        raise SystemExit(f"failed on torch {version}: {', '.join(failed)}")


if __name__ == "__main__":
    main()
