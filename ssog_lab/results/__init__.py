"""The one home of research results: run folders read as records, the statistics, the stored-results readers and
the claims ledger that sets the paper's claims beside them (docs/results/README.md is the index of the files).

    ledger   the claims ledger: every claim of arXiv:2611.08236 with this suite's measurement and a verdict;
             `python -m ssog_lab ledger` rewrites its copies in docs/results/README.md and README.md
"""
