"""The built-in report sections, one module each; `reports.section.SECTIONS` lists them once."""
