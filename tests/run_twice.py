"""nbconvert's ExecutePreprocessor, run twice in one kernel (tests/conftest.py's `executed` fixture uses it).

The first pass is exactly `jupyter nbconvert --to notebook --execute`: its outputs and widget state are the notebook
nbconvert writes. Then every cell runs again, top to bottom, in the same kernel, on a copy of the notebook that is
written to `second_pass_dir`: a notebook whose second pass prints something else depends on state a first pass left
behind (a global seed, a variable rebound further down), which is what a student gets after Run All, Run All.
tests/test_notebook_render.py compares the two passes' text.
"""

from __future__ import annotations

import copy
import os

import nbformat
from nbclient import NotebookClient
from nbconvert.preprocessors import ExecutePreprocessor
from traitlets import Unicode


class ExecuteTwice(ExecutePreprocessor):
    second_pass_dir = Unicode("", help="folder for NAME.second.ipynb, the second pass's notebook").tag(config=True)

    def preprocess(self, nb, resources=None, km=None):
        NotebookClient.__init__(self, nb, km)  # as ExecutePreprocessor.preprocess does
        self.reset_execution_trackers()
        self._check_assign_resources(resources)
        with self.setup_kernel():
            info_msg = self.wait_for_reply(self.kc.kernel_info())
            self.nb.metadata["language_info"] = info_msg["content"]["language_info"]
            for index, cell in enumerate(self.nb.cells):
                self.preprocess_cell(cell, resources, index)
            self.set_widgets_metadata()  # the first pass's widgets only: that is the notebook handed out
            first, self.nb = self.nb, copy.deepcopy(self.nb)
            self._display_id_map = {}  # display updates of the first pass's figures must not reach the copy
            for cell in self.nb.cells:
                if cell.cell_type == "code":
                    cell.outputs = []
            for index, cell in enumerate(self.nb.cells):
                self.preprocess_cell(cell, resources, index)
            second, self.nb = self.nb, first
        if self.second_pass_dir:
            name = self.resources.get("metadata", {}).get("name", "notebook")
            nbformat.write(second, os.path.join(self.second_pass_dir, f"{name}.second.ipynb"))
        return self.nb, self.resources
