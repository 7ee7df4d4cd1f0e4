"""modules.py: which module of the model an allocation belongs to (the trace's TAG).

Forward: global forward pre-hooks and hooks keep a stack of the model's modules that are running;
the innermost one is the tag. Backward: every autograd node created while a module ran is labelled
with that module in its metadata (a TorchFunctionMode walks the new part of the graph after each
call), and an op that the autograd engine runs is tagged with the label of the node executing it
(torch._C._current_autograd_node()). This leaves the graph exactly as it is (full backward hooks
would insert BackwardHookFunction nodes into it).
"""
import contextlib

import torch
import torch.nn.modules.module as nn_module
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree

NO_TAG = "-"
_KEY = "oomlab_tag"


def apply_order(model):
    """(name, tensor) of every parameter and buffer in the order nn.Module._apply visits them --
    what model.to("cuda") allocates: children first, then the module's own parameters, then its
    buffers. A tensor shared by two modules (tied weights) appears once, where _apply first meets it."""
    out, seen = [], set()

    def visit(m, prefix):
        for name, c in m.named_children():
            visit(c, f"{prefix}{name}.")
        for kind in (m._parameters, m._buffers):
            for name, t in kind.items():
                if t is not None and id(t) not in seen:
                    seen.add(id(t))
                    out.append((f"{prefix}{name}", t))

    visit(model, "")
    return out


class ModuleTags(TorchFunctionMode):
    """The current tag: the innermost running module of the model in forward, the module whose
    autograd node runs in backward, NO_TAG elsewhere. Use as a context manager around the steps."""

    def __init__(self, model, root_name=None):
        super().__init__()
        self.names = {id(m): (n or root_name or type(model).__name__) for n, m in model.named_modules()}
        self.param_names = {id(p): n for n, p in model.named_parameters(remove_duplicate=False)}
        self.stack = []
        self._handles = []

    # forward: the module stack
    def _pre(self, module, args):
        name = self.names.get(id(module))
        if name is not None:
            self.stack.append(name)

    def _post(self, module, args, output):
        if id(module) in self.names and self.stack:
            self.stack.pop()

    @contextlib.contextmanager
    def scope(self, name):
        """Tag what runs inside as name (the loss function outside the model)."""
        self.stack.append(name)
        try:
            yield
        finally:
            self.stack.pop()

    def current(self):
        node = torch._C._current_autograd_node()
        if node is not None:
            return node.metadata.get(_KEY, NO_TAG)
        return self.stack[-1] if self.stack else NO_TAG

    # backward: label the nodes that forward creates
    def _label(self, out):
        tag = self.stack[-1] if self.stack else NO_TAG
        todo = [t.grad_fn for t in pytree.tree_leaves(out)
                if isinstance(t, torch.Tensor) and t.grad_fn is not None]
        while todo:
            node = todo.pop()
            if node is None or _KEY in node.metadata:
                continue
            var = getattr(node, "variable", None)      # AccumulateGrad: the parameter's own name
            node.metadata[_KEY] = self.param_names.get(id(var), tag) if var is not None else tag
            todo.extend(n for n, _ in node.next_functions)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if torch.is_grad_enabled():
            self._label(out)
        return out

    def __enter__(self):
        self._handles = [nn_module.register_module_forward_pre_hook(self._pre),
                         nn_module.register_module_forward_hook(self._post, always_call=True)]
        return super().__enter__()

    def __exit__(self, *exc):
        for h in self._handles:
            h.remove()
        self._handles = []
        self.stack.clear()
        return super().__exit__(*exc)
