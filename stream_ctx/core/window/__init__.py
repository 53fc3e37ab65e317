"""A conversation's window and its rules: the configuration and presets (`config`), priority from
recency and salience (`scoring`), the bounded top-N accumulator (`accumulator`)."""
