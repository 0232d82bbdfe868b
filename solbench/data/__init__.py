"""The data layer: problem and spec files, result records, and the math over them (no execution of
candidates). Problems (``problem``), specs (``hardware``), where both are found (``library``),
records and the results store (``record``, ``results``), expressions, dtypes, YAML I/O, validation,
roofline math, FLOP counting, input generation, and the model roll-up."""
