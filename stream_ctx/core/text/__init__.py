"""Texts as lines and sentences, and the repeats between them: units and passages (`quotes`,
`textindex`, `textmatch`), reruns as diffs (`rerun`), the plan a text is written by (`plan`) and
the planner that makes it (`repeats`); `engine` picks the Python reference or the compiled twin
(`compiled.pyx`)."""
