#!/usr/bin/env node
import { launch } from "./launch.js"
await launch("venue")
