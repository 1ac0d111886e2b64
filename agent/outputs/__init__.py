"""What a run leaves behind: the run folder (run_folder), the standalone solution.py (solution) and report.html
(report)."""
