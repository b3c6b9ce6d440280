"""The task suite: task folders and their schema, the built-in suite and its generator, checks and audit, seeded
inputs, ONNX Runtime references and the comparison with them, prompts, the importer of outside tasks."""
