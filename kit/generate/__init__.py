"""Answers from a model: the tasks' initial prompts sent to an OpenAI-compatible endpoint (the official ``openai``
client), each answer written as a line of a JSONL candidate source that ``mkb eval`` reads (docs/generate.md).

- :mod:`~kit.generate.client`: one chat request, its attempts counted, its end classified;
- :mod:`~kit.generate.lines`: the answers file (resumable) and the errors file;
- :mod:`~kit.generate.batch`: every missing sample of the configured tasks, with bounded concurrency.
"""
