"""HLO text: the Lark grammar, the parser, validation and the printer (the only users of Lark and of source offsets)."""
