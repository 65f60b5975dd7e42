"""`python -m proctor`: the `proctor` command (launchers such as `torchrun -m proctor` start it this way)."""

from proctor.cli import main

if __name__ == "__main__":
    main()
