"""The Fashion-MNIST sweep: every mixer × depth form tuned on a validation split with the same budget, then trained
on 3 seeds at 7×7 and 14×14 tokens (`sweep`: plan and run; `measure`: dopri5 NFE and inference speed of the
trained models; `report` and `speed`: docs/results/accuracy_fashion/README.md). Its plan:
docs/results/accuracy_fashion/plan.md.

    python scripts/fashion_sweep.py run | report | nfe | speed
"""
