"""Helpers that several test files share (issue 38, point 7); no test lives here."""
