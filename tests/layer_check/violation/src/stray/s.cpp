// In a folder no rule declares.
