"""Our own fixture: needs a package that does not exist."""
import mkb_no_such_package_xyz  # noqa: F401
import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return x


def get_inputs():
    return [torch.randn(2, 2)]


def get_init_inputs():
    return []
