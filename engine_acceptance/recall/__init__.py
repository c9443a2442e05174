"""Long-context recall: haystacks with needles placed by token count, and reading the answers."""
